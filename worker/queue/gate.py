"""The job gate: RunPod's ``concurrency_modifier``, holding job intake until vLLM settles.

The SDK calls the modifier from its job loop, in the main thread, before every
job-take. The first call blocks until the supervisor settles (ready or failed) or a
stop is requested. So the SDK's own start-up (heartbeat process, HTTP session) happens
while vLLM loads, jobs stay queued on the platform meanwhile, and the first job-take
follows readiness within milliseconds. After that the value is fixed: the SDK resizes
its queue only when the value changes, and it should not.

The first call also chains a SIGTERM/SIGINT handler in front of the SDK's:
- while vLLM is still starting, a stop also stops vLLM (the SDK knows nothing of it);
- once settled, the SDK's graceful stop runs at once: it takes no new job (the job
  intake cancels a job-take the queue holds open, and lands one whose answer was
  arriving, ``worker/queue/intake.py``) and lets jobs in flight finish. The grace
  period (``VLLM_SHUTDOWN_GRACE``) counts from the signal; jobs still running after it
  lose vLLM, so they end with an error instead of holding the worker: nothing taken is
  left without an answer. (The modifier's value is never changed to stop intake: the
  SDK cannot resize with jobs queued.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import structlog

from worker.seams import logs
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

log = structlog.get_logger("worker.gate")


def _intake_taking() -> bool:
    """Whether the job intake's fetch loop still runs (a job-take may yet land jobs)."""
    from worker.queue import intake  # imported by then: the SDK runs the gate

    return intake.taking()


class JobGate:
    def __init__(
        self,
        supervisor: Supervisor,
        config: dict,
        max_concurrency: int,
        interrupted: threading.Event,
        on_transient: Callable[[], None],
        grace_s: float = 10.0,
        jobs_in_flight: Callable[[], int] = lambda: 0,
        taking: Callable[[], bool] = _intake_taking,
    ):
        self.grace_s = grace_s
        self.jobs_in_flight = jobs_in_flight
        self.taking = taking
        self.closed = threading.Event()
        self._pass_through = False
        self.supervisor = supervisor
        self.config = config
        self.max_concurrency = max_concurrency
        self.interrupted = interrupted
        self.on_transient = on_transient
        self.value: int | None = None

    def __call__(self, _current: int) -> int:
        if self.value is None:
            self._chain_signals()
            while not self.supervisor.settled.wait(0.1):
                if self.interrupted.is_set():
                    return 0
            if self.interrupted.is_set():  # stopped while starting: vLLM settled as stopped
                return 0
            self.value = self._decide()
        # Never change the value once serving: the SDK would stop starting queued jobs
        # while it waits for the jobs in flight to end (its resize), and hang.
        return self.value

    def _decide(self) -> int:
        state = self.supervisor.state
        log.info("worker.taking_jobs", state=state.value)
        if state is WorkerState.FAILED_TRANSIENT:
            # One job gets the diagnosis; then the SDK stops and the worker exits 1.
            self.config["refresh_worker"] = True
            self.on_transient()
            return 1
        return self.max_concurrency

    def _chain_signals(self) -> None:
        main_pid = os.getpid()
        for signum in (signal.SIGTERM, signal.SIGINT):
            sdk_handler = signal.getsignal(signum)

            def chained(number, frame, sdk_handler=sdk_handler):
                if os.getpid() != main_pid:  # a forked child inherited this: die as usual
                    signal.signal(number, signal.SIG_DFL)
                    os.kill(os.getpid(), number)
                    return
                if self._pass_through or self.closed.is_set():
                    if callable(sdk_handler):
                        sdk_handler(number, frame)
                    return
                name = signal.Signals(number).name
                if not self.supervisor.settled.is_set():
                    logs.from_signal_handler(log, "worker.signal", signal=name, phase="startup")
                    self.interrupted.set()
                    self.supervisor.request_stop()
                    if callable(sdk_handler):
                        sdk_handler(number, frame)
                    return
                jobs = self.jobs_in_flight()
                logs.from_signal_handler(
                    log, "worker.signal", signal=name, phase="serving", jobs=jobs
                )
                self.closed.set()
                threading.Thread(target=self._drain, args=(number,), daemon=True).start()

            signal.signal(signum, chained)
            if self.interrupted.is_set() and callable(sdk_handler):
                # A signal came before the SDK had its handlers: pass it on now.
                sdk_handler(signum, None)

    def _drain(self, signum: int) -> None:
        """Hand over to the SDK at once; wait for its intake to end and its jobs to
        finish, bounded by the grace; then stop vLLM."""
        deadline = time.monotonic() + self.grace_s
        self._pass_through = True
        os.kill(os.getpid(), signum)
        while self.taking() or self.jobs_in_flight() > 0:
            if time.monotonic() >= deadline:
                log.warning("worker.grace_over", jobs=self.jobs_in_flight())
                break
            self.supervisor.stopped.wait(0.05)
        self.supervisor.request_stop()
