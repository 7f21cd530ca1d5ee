"""Event-driven job intake: the RunPod SDK's job loop without its polling ticks.

The SDK's ``JobScaler`` (runpod 1.12.0, ``runpod/serverless/modules/rp_scale.py``)
looks at its job queue every 0.1 s: a taken job waits up to a tick before it starts,
and with every slot busy its fetch loop sleeps a whole second before it asks for more.
``EventJobScaler`` keeps everything else of the SDK (its HTTP calls, heartbeat, job
bookkeeping in ``JobsProgress``, per-job stop, the concurrency modifier that is our job
gate, its SIGTERM handling) and replaces only the waiting:

* the run loop sleeps until a job is queued or a job ends, and starts queued jobs at
  once, up to the concurrency;
* the fetch loop, with every slot busy, sleeps until a slot frees (or the stop), so a
  finished job's slot is refilled at once. It still wakes after 1 s as the SDK did, so
  a concurrency modifier is re-read as often as before;
* at the stop, the run loop ends only after the fetch loop has: the jobs of a job-take
  whose answer was arriving when the stop came are still run and answered (the SDK's
  loop could leave them queued and unanswered);
* the per-job stop poll runs while jobs do and is cancelled once both job loops have
  ended: the SDK waits for it too, which is up to a 1 s sleep after an empty answer or
  a stop poll the queue holds open (bounded at 90 s) between the last answer and exit.

And it hardens the fetch loop, where the SDK's could die or spin:

* every job-take element passes ``job_check.JobCheck`` (one per scaler, so a repeated
  id is recognised across batches) before it is queued: one bad element costs only
  itself (see ``worker/queue/job_check.py``);
* the stop cancels a job-take at once: a long poll the queue holds open (the SDK waited
  it out, up to 90 s) ends when the stop comes, so nothing is taken after it. A take
  whose answer has begun to arrive holds taken jobs: it gets ``TAKE_LANDING_S`` to be
  read whole, and its jobs are run and answered;
* a failed job-take (the queue answering 5xx, refusing connections, anything the
  fetch raises, an answer whose every element was dropped) is logged at warning and
  retried after a back-off that doubles from ``BACKOFF_FIRST_S`` to ``BACKOFF_MAX_S``
  (the SDK retried at once, thousands of times a second); 429 waits the SDK's 5 s.
  Every such wait ends at the stop.

``start`` is the one install point: the SDK's own ``runpod.serverless.start`` runs as
usual and builds this scaler where it would build its own. The SDK's version is pinned
in ``pyproject.toml``; ``tests/worker/queue/test_intake.py`` fails when the SDK code this
stands on changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import structlog
from runpod.http_client import AsyncClientSession, ClientSession, TooManyRequests
from runpod.serverless.modules import rp_scale
from runpod.serverless.modules.rp_scale import JobScaler

from worker.queue import job_fetch
from worker.queue.job_check import JobCheck

log = rp_scale.log  # the SDK's own logger: its job-loop messages stay as they were
events = structlog.get_logger("worker.intake")  # the worker's own events

# How long the fetch loop waits for a free slot before it re-reads the concurrency
# modifier anyway (the SDK's ``asyncio.sleep(1)`` in ``get_jobs``).
FULL_RECHECK_S = 1.0
# After the stop, how long a job-take whose answer has begun to arrive may take to be read.
TAKE_LANDING_S = 1.0
# The back-off after a failed job-take: doubles from the first to the most.
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 5.0
TOO_MANY_REQUESTS_S = 5.0  # the SDK's debounce after a 429

_fetch_loops = 0  # fetch loops running (read by the job gate's stop, another thread)


def taking() -> bool:
    """True while a job loop's fetch loop runs: after a stop, until it has ended (a
    job-take on the wire cancelled, or landed and its jobs queued)."""
    return _fetch_loops > 0


class NoJobInBatch(Exception):
    """A job-take answer whose every element was dropped: backed off like an error."""


async def take(
    session: ClientSession, need: int, check: JobCheck, stop: asyncio.Event, timeout: float
) -> list[dict]:
    """One job-take of ``need`` jobs, ended by ``stop`` unless its answer has begun to arrive."""
    answering = asyncio.Event()
    asked = job_fetch.fetch_jobs(session, need, check=check, answering=answering)
    fetch = asyncio.ensure_future(asyncio.wait_for(asked, timeout=timeout))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((fetch, stopped), return_when=asyncio.FIRST_COMPLETED)
        if not fetch.done() and answering.is_set():  # its jobs are taken: read them
            events.info("job.take_landing_at_stop", within_s=TAKE_LANDING_S)
            await asyncio.wait((fetch,), timeout=TAKE_LANDING_S)
    finally:
        stopped.cancel()
        if not fetch.done():
            fetch.cancel()
    if not fetch.done():  # cancelled at the stop (a BaseException would propagate)
        if answering.is_set():
            events.warning("job.take_cut_at_stop", waited_s=TAKE_LANDING_S)
        else:
            events.info("job.take_cancelled_at_stop")
        return []
    return fetch.result() or []


def take_failed(error: Exception, failures: int) -> float:
    """Log the ``failures``-th failed job-take in a row; the back-off before the next."""
    delay = min(BACKOFF_FIRST_S * 2 ** (failures - 1), BACKOFF_MAX_S)
    events.warning(
        "job.take_failed",
        error_type=type(error).__name__,
        error=str(error)[:200],
        failures=failures,
        retry_in_s=delay,
    )
    return delay


class EventJobScaler(JobScaler):
    """``JobScaler`` whose loops wait on events instead of ticks (see the module doc)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self.job_check = JobCheck()  # every element; remembers the ids taken
        # never loses a batch to deep nesting, nor the loop to one bad element
        self.jobs_fetcher = functools.partial(job_fetch.fetch_jobs, check=self.job_check)
        self._job_queued = asyncio.Event()  # wakes the run loop
        self._slot_freed = asyncio.Event()  # wakes the fetch loop
        self._stopping = asyncio.Event()  # ends every wait of the fetch loop
        self._fetching = True
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """The SDK's ``run``, ending the per-job stop poll once the job loops have ended."""
        self._loop = asyncio.get_running_loop()
        if not self.is_alive():  # stopped before the loop ran
            self._wake_both()
        async with AsyncClientSession() as session:
            stop_poll = asyncio.create_task(self.monitor_stop_signals(session))
            try:
                await asyncio.gather(self.get_jobs(session), self.run_jobs(session))
            finally:
                stop_poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await stop_poll

    def kill_worker(self) -> None:
        super().kill_worker()
        # Also called from the SDK's signal handler: wake the loop through its self-pipe
        # (a plain Event.set() from a signal handler does not end the loop's select).
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_both)

    def _wake_both(self) -> None:
        self._job_queued.set()
        self._slot_freed.set()
        if not self.is_alive():
            self._stopping.set()

    async def get_jobs(self, session: ClientSession) -> None:
        """The SDK's ``get_jobs``, waiting for a free slot instead of sleeping 1 s, its
        job-take cancelled by the stop, its errors backed off (see the module doc)."""
        global _fetch_loops
        _fetch_loops += 1
        failures = 0
        try:
            while self.is_alive():
                await self.set_scale()

                jobs_needed = self.current_concurrency - self.current_occupancy()
                if jobs_needed <= 0:
                    await self._wait_for_slot()
                    continue

                dropped = self.job_check.dropped
                stop, timeout = self._stopping, self.jobs_fetcher_timeout
                try:
                    acquired_jobs = await take(session, jobs_needed, self.job_check, stop, timeout)
                    if not acquired_jobs and self.job_check.dropped > dropped:
                        raise NoJobInBatch(f"{self.job_check.dropped - dropped} dropped")
                except TooManyRequests:
                    await self._pause(TOO_MANY_REQUESTS_S)  # the SDK's debounce
                    continue
                except Exception as error:  # never CancelledError: a BaseException
                    failures += 1
                    await self._pause(take_failed(error, failures))
                    continue
                failures = 0
                if acquired_jobs:
                    await self._queue_jobs(acquired_jobs)
                    log.info(f"Jobs in queue: {self.jobs_queue.qsize()}")
                await asyncio.sleep(0)
        finally:
            _fetch_loops -= 1
            self._fetching = False
            self._job_queued.set()

    async def _queue_jobs(self, jobs: list[dict]) -> None:
        """Queue checked jobs for the run loop (more than asked for wait for a free slot)."""
        for job in jobs:
            try:
                await self.jobs_queue.put(job)
                self.job_progress.add(job)
            except Exception as error:  # never expected after the check: lose one job only
                events.error(
                    "job.not_queued", job_id=str(job.get("id"))[:64], error=repr(error)[:200]
                )
                continue
            self._job_queued.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the stop comes."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _wait_for_slot(self) -> None:
        # No await between the caller's occupancy check and clear(): no lost wake-up.
        self._slot_freed.clear()
        if not self.is_alive():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._slot_freed.wait(), FULL_RECHECK_S)

    async def run_jobs(self, session: ClientSession) -> None:
        """Start queued jobs as soon as they are queued and a slot is free."""
        tasks: set[asyncio.Task] = set()

        def finished(task: asyncio.Task) -> None:
            tasks.discard(task)
            if not task.cancelled():
                task.exception()  # the SDK's handle_job already logged it
            self._job_queued.set()
            self._slot_freed.set()

        last_task_count = 0
        while True:
            self._job_queued.clear()
            started = False
            while len(tasks) < self.current_concurrency and not self.jobs_queue.empty():
                job = self.jobs_queue.get_nowait()
                task = asyncio.create_task(self.handle_job(session, job))
                task.add_done_callback(finished)
                tasks.add(task)
                self.jobs_tasks[job["id"]] = task
                started = True
            if started:
                # The fetch loop counts a queued job twice (queue and JobsProgress).
                self._slot_freed.set()
            if started and len(tasks) != last_task_count:  # as often as jobs start, at most
                log.info(f"Jobs in progress: {len(tasks)}")
                last_task_count = len(tasks)
            if not self.is_alive() and not self._fetching and self.jobs_queue.empty():
                break
            await self._job_queued.wait()

        # The SDK's drain: let the jobs in flight finish; a stopped job's
        # CancelledError is expected, a handler error is logged.
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, asyncio.CancelledError):
                log.error(f"JobScaler.run_jobs | Task failed during shutdown drain: {result}")


# The scaler ``start`` installs; bench/job_overhead.py sets the SDK's own to compare.
SCALER: type[JobScaler] = EventJobScaler


@contextlib.contextmanager
def scaler_installed(scaler: type[JobScaler]) -> Iterator[None]:
    """Have the SDK build ``scaler`` where it builds its ``JobScaler``.

    ``runpod.serverless.worker.run_worker`` looks the class up on ``rp_scale`` at call
    time (``rp_scale.JobScaler(config)``); nothing else in the SDK builds one.
    """
    original = rp_scale.JobScaler
    rp_scale.JobScaler = scaler
    try:
        yield
    finally:
        rp_scale.JobScaler = original


def start(config: dict[str, Any]) -> None:
    """``runpod.serverless.start(config)`` with event-driven job intake."""
    import runpod.serverless

    with scaler_installed(SCALER):
        runpod.serverless.start(config)
