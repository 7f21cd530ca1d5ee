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
* at the stop, the run loop ends only after the fetch loop has: a job-take that was on
  the wire when the stop came is still run and answered (the SDK's loop could leave it
  queued and unanswered);
* the per-job stop poll runs while jobs do and is cancelled once both job loops have
  ended: the SDK waits for it too, which is up to a 1 s sleep after an empty answer or
  a stop poll the queue holds open (bounded at 90 s) between the last answer and exit.

``start`` is the one install point: the SDK's own ``runpod.serverless.start`` runs as
usual and builds this scaler where it would build its own. The SDK's version is pinned
in ``pyproject.toml``; ``tests/worker/queue/test_intake.py`` fails when the SDK code this
stands on changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from runpod.http_client import AsyncClientSession, ClientSession, TooManyRequests
from runpod.serverless.modules import rp_scale
from runpod.serverless.modules.rp_scale import JobScaler

from worker.queue import job_fetch

log = rp_scale.log  # the SDK's own logger: its job-loop messages stay as they were

# How long the fetch loop waits for a free slot before it re-reads the concurrency
# modifier anyway (the SDK's ``asyncio.sleep(1)`` in ``get_jobs``).
FULL_RECHECK_S = 1.0


class EventJobScaler(JobScaler):
    """``JobScaler`` whose loops wait on events instead of ticks (see the module doc)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self.jobs_fetcher = job_fetch.fetch_jobs  # never loses a batch to deep nesting
        self._job_queued = asyncio.Event()  # wakes the run loop
        self._slot_freed = asyncio.Event()  # wakes the fetch loop
        self._fetching = True
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        """The SDK's ``run``, ending the per-job stop poll once the job loops have ended."""
        self._loop = asyncio.get_running_loop()
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

    async def get_jobs(self, session: ClientSession) -> None:
        """The SDK's ``get_jobs``, waiting for a free slot instead of sleeping 1 s."""
        try:
            while self.is_alive():
                await self.set_scale()

                jobs_needed = self.current_concurrency - self.current_occupancy()
                if jobs_needed <= 0:
                    await self._wait_for_slot()
                    continue

                try:
                    acquired_jobs = await asyncio.wait_for(
                        self.jobs_fetcher(session, jobs_needed),
                        timeout=self.jobs_fetcher_timeout,
                    )
                    if not acquired_jobs:
                        continue
                    for job in acquired_jobs:
                        await self.jobs_queue.put(job)
                        self.job_progress.add(job)
                        self._job_queued.set()
                    log.info(f"Jobs in queue: {self.jobs_queue.qsize()}")
                except TooManyRequests:
                    await asyncio.sleep(5)  # the SDK's debounce
                except asyncio.CancelledError:
                    raise
                except TimeoutError:
                    log.debug("JobScaler.get_jobs | Job acquisition timed out. Retrying.")
                except TypeError as error:
                    log.debug(f"JobScaler.get_jobs | Unexpected error: {error}.")
                except Exception as error:
                    log.error(
                        f"Failed to get job. | Error Type: {type(error).__name__} | "
                        f"Error Message: {error}"
                    )
                finally:
                    await asyncio.sleep(0)
        finally:
            self._fetching = False
            self._job_queued.set()

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
