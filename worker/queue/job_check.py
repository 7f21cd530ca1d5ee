"""``JobCheck``: the one step every job-take element passes; the SDK's job loop, its
``JobsProgress``, its result URLs and its heartbeat see only what it returns. The SDK
trusts every element: one without ``id`` (or ``null``, a string, a list as id) raised
in its loop and ended the worker with the rest of the batch taken and unanswered; an
integer id made its job list raise on every job-take (the loop spun, taking nothing); a
repeated id ran twice; a single job without ``input`` was dropped. The rules, in order:

* The body: a JSON list of elements (job-take-batch) or one object (job-take). Anything
  else (a number, a string, ``true``, ``null``) is logged and dropped
  (``worker.queue.take_body``).
* An element must be a JSON object with a usable ``id``: a string (the protocol's ids
  are strings, ``"<uuid>-u1"``) of 1 to ``MAX_ID_LENGTH`` characters, each one a URL path
  carries as itself (RFC 3986 ``pchar``: letters, digits, ``-._~!$&'()*+;=:@``) except
  ``%`` (a percent escape would be decoded into another id) and ``,`` (the heartbeat
  lists the ids in progress comma-separated), and not ``.`` or ``..`` (path segments
  that a URL normalises away). The SDK puts the id verbatim into the job-done and
  job-stream URLs, the ``X-Request-ID`` header and the heartbeat. A number, bool, null,
  list or object is not an id: its text form would be a guess, and a guess can answer
  another job. Nothing can answer an element without a usable id: it is logged (its
  position, the id's type and first 64 characters, never the input) and dropped.
* An id already taken in this worker's lifetime (in the same batch or an earlier one;
  the last ``MAX_SEEN_IDS`` ids are remembered, under 4 MB at most) is a duplicate: the
  first copy is run and answered once, the repeat is logged and dropped.
* ``input`` must be present and a JSON object; if not, the job is kept and answered as a
  bad input (``INPUT_ERROR``) whatever the worker's state.
* Other fields (``webhook``, ``policy``, ``batchId``, ...) are kept, except names the SDK
  cannot take (it makes every field an attribute of its ``Job``: ``self`` and
  ``__dunder__`` names raise there) and ``INPUT_ERROR`` itself (a job cannot bring its
  own answer); those are dropped from the job, with a warning.

Logging is bounded: the first ``MAX_LOGGED`` dropped elements of a batch get a line
each, the rest one line with their count.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import structlog

from worker.queue.take_body import MAX_DEPTH, kind

log = structlog.get_logger("worker.job_fetch")

INPUT_ERROR = "worker_input_error"  # a job field (not in the input): the answer to give
MAX_ID_LENGTH = 256
MAX_SEEN_IDS = 10_000
MAX_LOGGED = 10
_USABLE_ID = re.compile(rf"[A-Za-z0-9._~!$&'()*+;=:@-]{{1,{MAX_ID_LENGTH}}}")
_NO_INPUT = 'The job has no input: a job is {"id": "...", "input": {...}}, its input a JSON object.'
_TOO_DEEP = (
    f"The job input is nested deeper than {MAX_DEPTH} levels, more than the worker can "
    "read; flatten it (or send deep structures as a JSON string)."
)


class JobCheck:
    """The one check every job-take element passes (the rules are in the module doc).

    It remembers the ids it let through, the last ``max_seen`` of them, for the
    worker's lifetime: the job loop holds one for as long as it runs.
    """

    def __init__(self, max_seen: int = MAX_SEEN_IDS) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._max_seen = max_seen
        self.dropped = 0  # elements (and unreadable bodies) dropped in its lifetime

    def accept(self, elements: Iterable[object], too_deep: Iterable[int] = ()) -> list[dict]:
        """The jobs to run, in order; every other element is logged and dropped."""
        deep = set(too_deep)
        jobs: list[dict] = []
        dropped = 0
        count = 0
        for index, element in enumerate(elements):
            count += 1
            job = self._job(element)
            if isinstance(job, str):
                dropped += 1
                self.dropped += 1
                if dropped <= MAX_LOGGED:
                    log.warning(
                        "job.dropped",
                        index=index,
                        problem=job,
                        id=_id_of(element),
                    )
                continue
            if index in deep:
                job[INPUT_ERROR] = _TOO_DEEP
                log.warning("job.input_too_deep", job_id=job["id"])
            jobs.append(job)
        if dropped > MAX_LOGGED:
            log.warning("job.dropped_more", dropped=dropped - MAX_LOGGED, elements=count)
        return jobs

    def _job(self, element: object) -> dict | str:
        """The job to run for ``element``, or why it cannot be run (nothing can answer it)."""
        if not isinstance(element, dict):
            return f"the element is {kind(element)}, not a job object"
        if "id" not in element:
            return "the job has no id"
        job_id = element["id"]
        if not isinstance(job_id, str):
            return f"its id is {kind(job_id)}, not a string"
        if not job_id:
            return "its id is an empty string"
        if len(job_id) > MAX_ID_LENGTH:
            return f"its id is {len(job_id)} characters long, more than {MAX_ID_LENGTH}"
        if not _USABLE_ID.fullmatch(job_id) or job_id in (".", ".."):
            return "its id has a character a URL path cannot carry as itself"
        if job_id in self._seen:
            self._seen.move_to_end(job_id)
            return "its id was taken before: a duplicate (the first copy is answered)"
        self._seen[job_id] = None
        if len(self._seen) > self._max_seen:
            self._seen.popitem(last=False)
        job = {key: value for key, value in element.items() if not _reserved(key)}
        if len(job) != len(element):
            names = [key[:64] for key in element if _reserved(key)][:20]
            log.warning("job.fields_dropped", job_id=job_id, fields=names)
        job_input = element.get("input")
        if not isinstance(job_input, dict) and INPUT_ERROR not in job:
            job[INPUT_ERROR] = (
                _NO_INPUT
                if job_input is None
                else f"The job input must be a JSON object, got {kind(job_input)}."
            )
            log.warning("job.no_input", job_id=job_id, input=kind(job_input))
        return job


def _reserved(key: str) -> bool:
    """A field the worker drops: the SDK's ``Job(**job)`` raises on ``self`` and on
    dunder names; ``INPUT_ERROR`` is the worker's own."""
    return key in ("self", INPUT_ERROR) or (len(key) > 4 and key[:2] == key[-2:] == "__")


def _id_of(element: object) -> str | None:
    """A dropped element's id for the log: its first 64 characters, or what it is."""
    if not isinstance(element, dict) or "id" not in element:
        return None
    job_id = element["id"]
    if isinstance(job_id, str):
        return job_id[:64] + ("..." if len(job_id) > 64 else "")
    if isinstance(job_id, int | float) and not isinstance(job_id, bool):
        return f"{job_id!r}"[:64]
    return kind(job_id)


def answer_for(job: dict[str, Any]) -> str | None:
    """The bad-input message for a job whose input the check refused (missing, not an
    object, nested too deep to read whole), else None."""
    message = job.get(INPUT_ERROR)
    return message if isinstance(message, str) else None
