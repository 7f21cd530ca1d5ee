"""Job-take: the body read whole, and every element checked before the SDK sees it.

:func:`fetch_jobs` is runpod 1.12's ``rp_job.get_job``, the same request and the same
handling of 204/400/429/errors/content type, but the body is read by the worker
(:func:`parse_jobs`): read whole, never lost to deep nesting
(``worker.queue.take_body``), then every element through the one check
(``worker.queue.job_check.JobCheck``: ids, duplicates, inputs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.queue.job_check import JobCheck
from worker.queue.take_body import read_body

if TYPE_CHECKING:  # runpod is imported when jobs are fetched: main imports the queue
    import asyncio  # mode's modules before the supervisor (pre-flight, vLLM) starts, and

    from runpod.http_client import ClientSession  # the SDK takes ~0.3 s to import.


async def fetch_jobs(
    session: ClientSession,
    num_jobs: int = 1,
    *,
    check: JobCheck | None = None,
    answering: asyncio.Event | None = None,
) -> list[dict] | None:
    """``rp_job.get_job`` with a parser that never loses a batch to deep nesting, and
    every element through ``check`` (a fresh :class:`JobCheck` if None: no duplicate is
    then recognised across calls). ``answering`` is set once the queue's answer has begun
    to arrive (its status line and headers): from then on its jobs are taken."""
    from runpod.http_client import TooManyRequests
    from runpod.serverless.modules import rp_job

    async with session.get(rp_job._job_get_url(num_jobs)) as response:
        if answering is not None:
            answering.set()
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
    return parse_jobs(body, check)


def parse_jobs(body: bytes, check: JobCheck | None = None) -> list[dict]:
    """The jobs to run from a job-take body: read whole (:func:`read_body`), then every
    element through ``check`` (its rules: ``worker.queue.job_check``). An unreadable body
    gives none."""
    check = check or JobCheck()
    read = read_body(body)
    if read is None:
        check.dropped += 1  # the whole answer
        return []
    elements, too_deep = read
    return check.accept(elements, too_deep)
