"""Job-take that survives job inputs nested too deeply for Python's JSON parser.

runpod 1.12's ``rp_job.get_job`` parses the job-take body with ``response.json()``; an
input nested about 1,000 levels deep raises ``RecursionError``, which its fetch loop
logs as "Failed to get job": every job of that batch is lost, taken but never answered
(the platform only sees them time out). :func:`fetch_jobs` is the same request and the
same handling of 204/400/429/errors/content type, but parses the body itself: when the
parser recurses too deep, every container nested deeper than ``MAX_DEPTH`` is replaced
(by one linear scan, no recursion) with a placeholder, the batch is parsed again, and
each job that lost part of its input carries ``INPUT_ERROR``, which the handler answers
as a bad input. So every job of the batch is answered.

What it cannot do: a body that is not valid JSON (or not UTF-8) is still dropped, as the
SDK drops it (no job id can be trusted from it).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:  # runpod is imported when jobs are fetched: the handler imports this
    from runpod.http_client import ClientSession  # module, and main imports the handler
    # before the supervisor (pre-flight, vLLM) starts; the SDK takes ~0.3 s to import.

log = structlog.get_logger("worker.job_fetch")

INPUT_ERROR = "worker_input_error"  # a job field (not in the input): the answer to give
MAX_DEPTH = 500
_PLACEHOLDER = json.dumps(f"<nested deeper than {MAX_DEPTH} levels>")
_TOKENS = re.compile(r'[\[\]{}"\\]')


async def fetch_jobs(session: ClientSession, num_jobs: int = 1) -> list[dict] | None:
    """``rp_job.get_job`` with a parser that never loses a batch to deep nesting."""
    from runpod.http_client import TooManyRequests
    from runpod.serverless.modules import rp_job

    async with session.get(rp_job._job_get_url(num_jobs)) as response:
        if response.status in (204, 400):  # no jobs; 400 is expected with FlashBoot
            return None
        if response.status == 429:
            raise TooManyRequests(
                response.request_info,
                response.history,
                status=response.status,
                message=response.reason,
            )
        response.raise_for_status()
        if response.content_type != "application/json" or response.content_length == 0:
            return None
        body = await response.read()
    return parse_jobs(body)


def parse_jobs(body: bytes) -> list[dict] | None:
    """The jobs in a job-take body (one object, or a list for the batch API)."""
    damaged: set[int] = set()
    try:
        text = body.decode("utf-8")
        try:
            jobs = json.loads(text)
        except RecursionError:
            flat, damaged = flatten(text, MAX_DEPTH)
            jobs = json.loads(flat)
    except (ValueError, RecursionError) as error:  # ValueError includes UnicodeDecodeError
        log.warning("job.take_unreadable", error=str(error)[:200])
        return None
    if isinstance(jobs, dict):
        if "id" not in jobs or "input" not in jobs:
            raise Exception("Job has missing field(s): id or input.")  # as the SDK does
        jobs = [jobs]
    if not isinstance(jobs, list):
        return None
    for index in damaged:
        if index < len(jobs) and isinstance(jobs[index], dict):
            job = jobs[index]
            job[INPUT_ERROR] = (
                f"The job input is nested deeper than {MAX_DEPTH} levels, more than the "
                "worker can read; flatten it (or send deep structures as a JSON string)."
            )
            log.warning("job.input_too_deep", job_id=str(job.get("id"))[:100])
    return jobs


def flatten(text: str, max_depth: int) -> tuple[str, set[int]]:
    """``text`` (JSON) with every container deeper than ``max_depth`` replaced by a
    placeholder string, and the indexes of the jobs that held one (the top-level object
    is job 0; in a top-level list, its items are jobs 0, 1, ...). Linear, no recursion."""
    out: list[str] = []
    damaged: set[int] = set()
    depth = 0
    in_string = False
    skip_to = 0  # after a backslash inside a string, the escaped character
    copied = 0  # text[:copied] is in out (or replaced)
    cut_from = -1
    top_is_list = False
    job = -1
    for match in _TOKENS.finditer(text):
        at = match.start()
        if at < skip_to:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip_to = at + 2
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth == 1:
                top_is_list = char == "["
                job = -1 if top_is_list else 0
            elif depth == 2 and top_is_list:
                job += 1
            if depth == max_depth + 1:
                cut_from = at
        elif char in "]}":
            if depth == max_depth + 1 and cut_from >= 0:
                out.append(text[copied:cut_from])
                out.append(_PLACEHOLDER)
                copied = at + 1
                cut_from = -1
                damaged.add(max(job, 0))
            depth -= 1
    out.append(text[copied:])
    return "".join(out), damaged


def answer_for(job: dict[str, Any]) -> str | None:
    """The bad-input message for a job the fetch could only read in part, else None."""
    message = job.get(INPUT_ERROR)
    return message if isinstance(message, str) else None
