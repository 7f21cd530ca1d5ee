"""The supervisor: follows one vLLM start to a settled state and stops it on request.

It owns the parts and wires them: the process (``vllm_process``: spawn, drain, kill its
group), the classifier that reads every line, the lifecycle and its effects (``machine``,
``effects``), the watchdog (``watchdog``: fatal wait, startup and stall limits), the
health probe (``health``), the download watch and the crash-loop breaker
(``worker.crashloop.crash_loop``). Its vLLM processes, one after another, are
``restarts``: a failure that a relaunch with what vLLM measured can fix (``relaunch``)
starts vLLM again in this container, at most twice. It runs on its own asyncio loop in
a background thread so the RunPod SDK can own the main thread; other threads read
``state`` and wait on ``settled``, ``spawned`` and ``stopped``.

The clock and the process are injectable: the tests drive stalls, timeouts, the wait
after a fatal line and a death after ready with stand-in processes in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog

from diagnostics import Classifier, Diagnosis, RulePack, State
from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import secret_values
from worker.config.settings import Settings
from worker.crashloop.crash_loop import CrashLoopBreaker
from worker.supervision import launch
from worker.supervision.coldstart import ColdStartClock, timing_markers
from worker.supervision.effects import WorkerEffects
from worker.supervision.follower import Output, StartFollower, Timing
from worker.supervision.machine import Lifecycle
from worker.supervision.restarts import Restarts, new_watchdog
from worker.supervision.vllm_process import VllmProcess

if TYPE_CHECKING:  # the pre-flight's imports (the hub's schemas) load when it runs
    from worker.preflight import PreflightResult

log = structlog.get_logger("worker.supervisor")


def secrets_of(env: Mapping[str, str]) -> list[str]:
    return secret_values(env)  # the one rule: diagnostics.redaction.secrets


class Supervisor:
    """Starts vLLM and follows it to a settled state; stops it on request."""

    def __init__(
        self,
        settings: Settings,
        pack: RulePack,
        env: Mapping[str, str],
        *,
        config_failure: Diagnosis | None = None,
        passthrough: Output | None = None,
        clock: Callable[[], float] = time.monotonic,
        timing: Timing | None = None,
        preflight: Callable[[Mapping[str, str]], PreflightResult] | None = None,
    ):
        self.settings, self.timing = settings, timing or Timing()
        self.redact = Redactor(secrets_of(env))
        classifier = Classifier(pack, redactor=self.redact)
        self._stop_requested = False
        self._config_failure, self._preflight = config_failure, preflight
        self._loop: asyncio.AbstractEventLoop | None = None
        self._preflight_task: asyncio.Future[bool] | None = None
        argv, child_env = launch.vllm_argv(settings), launch.vllm_env(settings, env)
        process = VllmProcess(argv, child_env, settings.shutdown_grace_s)
        now = clock()
        self.cold_start = ColdStartClock(now, markers=timing_markers(pack))
        breaker = CrashLoopBreaker(settings) if config_failure is None else None
        self.effects = WorkerEffects(clock, self.cold_start, breaker, self._stop_soon)
        self.lifecycle = Lifecycle(self.effects)
        self.follower = StartFollower(
            settings,
            process,
            classifier,
            self.lifecycle,
            self.effects,
            new_watchdog(classifier, now, settings, self.timing),
            self.cold_start,
            redact=self.redact,
            out=passthrough if passthrough is not None else sys.stdout.buffer,
            clock=clock,
            timing=self.timing,
        )
        self.settled = self.effects.settled
        self.stopped = threading.Event()
        # Set once vLLM was spawned (or will not be): whatever forks in this process (the
        # SDK's heartbeat) must wait, or it inherits the spawn's exec pipe and hangs it.
        self.spawned = threading.Event()
        stopping = lambda: self._stop_requested  # noqa: E731 (read by the relaunch loop)
        self.restarts = Restarts(  # each vLLM process of this start, relaunches included
            self.follower, pack, self.redact, stopping, self.spawned, clock, self.timing
        )

    @property
    def process(self) -> VllmProcess:
        """vLLM's process now (a relaunch replaces it)."""
        return self.follower.process

    @property
    def classifier(self) -> Classifier:
        return self.follower.classifier

    @property
    def exit_code(self) -> int | None:
        """vLLM's exit code, once the last process of this start has exited."""
        return self.restarts.exit_code

    @property
    def state(self) -> State:
        return self.lifecycle.state

    @property
    def diagnosis(self) -> Diagnosis | None:
        return self.lifecycle.diagnosis

    @property
    def on_died(self) -> Callable[[], None] | None:
        return self.effects.on_died

    @on_died.setter
    def on_died(self, callback: Callable[[], None] | None) -> None:
        self.effects.on_died = callback

    def tail(self, count: int = 60) -> list[str]:
        return self.classifier.tail(count)

    def start_info(self) -> dict:
        """What the worker states about this start: ``max_model_len`` (the length vLLM
        serves, once ready), ``estimate`` (the pre-flight's numbers) and ``relaunches``."""
        info = self.effects.info
        return {**info, "relaunches": list(info["relaunches"])}

    # -- called from other threads

    def start(self) -> None:
        """Start vLLM in a background thread, or settle at once on a configuration failure."""
        if self._config_failure is not None:
            self.spawned.set()
            self.stopped.set()
            self.lifecycle.fail(self._config_failure)
        else:
            self.run_in_thread()

    def run_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self._thread_main, name="vllm-supervisor", daemon=True)
        thread.start()
        return thread

    def request_stop(self) -> None:
        """Thread-safe: stop vLLM (SIGTERM to its group, SIGKILL after the grace period)."""
        self._stop_requested = True
        self.process.request_stop()
        self._stop_soon()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self.stopped.wait(timeout)

    # -- the supervisor's thread

    def _thread_main(self) -> None:
        try:
            asyncio.run(self.run())
        except Exception as exc:  # the outermost loop of this thread
            log.exception("supervisor.crashed", error=str(exc))
            if not self.lifecycle.settled:
                self.follower.fail(self.classifier.diagnosis(exited=True))
        finally:
            self.spawned.set()
            self.stopped.set()

    async def run(self) -> None:
        """Spawn vLLM, read its output to the end, settle by its exit."""
        self._loop = asyncio.get_running_loop()
        if self._preflight is not None:  # a task: a stop cancels it (_stop_soon)
            pending = self.follower.predicted_failure(self._preflight)
            task = self._preflight_task = asyncio.ensure_future(pending)
            if await _settled_or_stopped(task):
                return
        if not self._stop_requested:
            await self.restarts.run()

    def _stop_soon(self) -> None:
        """Thread-safe: have the loop cancel the pre-flight and stop vLLM's process group."""
        loop, task = self._loop, self._preflight_task
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            if task is not None and not task.done():
                loop.call_soon_threadsafe(task.cancel)
            if self.process.running:
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.process.kill()))


async def _settled_or_stopped(task: asyncio.Future[bool]) -> bool:
    """The pre-flight's answer (True: it settled the start); True too when a stop
    cancelled it (a SIGTERM while the hub trickles): vLLM is then never spawned."""
    try:
        return await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        return True
