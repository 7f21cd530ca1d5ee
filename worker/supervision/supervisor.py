"""The supervisor: follows one vLLM start to a settled state and stops it on request.

It owns the parts and wires them: the process (``vllm_process``: spawn, drain, kill its
group), the classifier that reads every line, the lifecycle and its effects (``machine``,
``effects``), the watchdog (``watchdog``: fatal wait, startup and stall limits), the
health probe (``health``), the download watch and the crash-loop breaker
(``worker.crashloop.crash_loop``). A failure that a relaunch with what vLLM measured can
fix (``relaunch``) starts vLLM again in this container, at most twice. It runs on its
own asyncio loop in
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

import structlog

from diagnostics import Category, Classifier, Diagnosis, Evidence, RulePack, State
from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import secret_values
from worker.config.settings import Settings
from worker.crashloop.crash_loop import CrashLoopBreaker
from worker.preflight import PreflightResult
from worker.seams.downloads import DownloadWatch, hf_cache_dir
from worker.supervision import launch
from worker.supervision import relaunch_apply as relaunch
from worker.supervision.coldstart import ColdStartClock, timing_markers
from worker.supervision.effects import WorkerEffects
from worker.supervision.follower import Output, StartFollower, Timing
from worker.supervision.machine import Lifecycle
from worker.supervision.relaunch import Relaunch, decide
from worker.supervision.vllm_process import VllmProcess
from worker.supervision.watchdog import Watchdog

log = structlog.get_logger("worker.supervisor")


def config_failure(var: str, message: str) -> Diagnosis:
    """A configuration judged bad before launch: permanent, names the variable."""
    return Diagnosis(
        state=State.FAILED_PERMANENT,
        category=Category.BAD_CONFIG,
        rule="invalid-setting",
        evidence=Evidence(0, f"environment variable {var}"),
        cause=f"The worker's configuration is invalid: {message}",
        fix=f"Correct {var} on the endpoint and start a new worker; vLLM was not started.",
    )


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
        self.pack, self.clock = pack, clock
        self.redact = Redactor(secrets_of(env))
        self.classifier = Classifier(pack, redactor=self.redact)
        self.args = list(settings.vllm_args)  # vLLM's arguments now (a relaunch changes them)
        self._stop_requested = False
        self.exit_code: int | None = None
        self._config_failure, self._preflight = config_failure, preflight
        self._loop: asyncio.AbstractEventLoop | None = None
        argv, child_env = launch.vllm_argv(settings), launch.vllm_env(settings, env)
        self.process = VllmProcess(argv, child_env, settings.shutdown_grace_s)
        now = clock()
        self.cold_start = ColdStartClock(now, markers=timing_markers(pack))
        self.watchdog = Watchdog(
            self.classifier,
            now,
            settings.startup_timeout_s,
            settings.stall_timeout_s,
            self.timing.linger_after_fatal_s,
        )
        breaker = CrashLoopBreaker(settings) if config_failure is None else None
        self.effects = WorkerEffects(clock, self.cold_start, breaker, self._stop_soon)
        self.lifecycle = Lifecycle(self.effects)
        self.follower = StartFollower(
            settings,
            self.process,
            self.classifier,
            self.lifecycle,
            self.effects,
            self.watchdog,
            self.cold_start,
            redact=self.redact,
            out=passthrough if passthrough is not None else sys.stdout.buffer,
            clock=clock,
            timing=self.timing,
        )
        self.follower.relaunch_for = self._relaunch_for
        self.settled = self.effects.settled
        self.stopped = threading.Event()
        # Set once vLLM was spawned (or will not be): whatever forks in this process (the
        # SDK's heartbeat) must wait, or it inherits the spawn's exec pipe and hangs it.
        self.spawned = threading.Event()

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
        follow = self.follower
        if self._preflight is not None and await follow.predicted_failure(self._preflight):
            return
        initial = relaunch.auto_length(self.args, self.effects.info.get("estimate"))
        if initial is not None:
            self._replace_process(initial.changes)
            log.info(
                "worker.max_model_len",
                source="estimate",
                reason=initial.reason,
                max_model_len=initial.changes.get("MAX_MODEL_LEN") or None,
            )
        while True:
            await self._run_once()
            pending, follow.pending = follow.pending, None
            if pending is None or self.lifecycle.settled:
                return
            if self._stop_requested:
                self.lifecycle.stop()
                return
            self._replace_process(pending.changes)

    async def _run_once(self) -> None:
        """One vLLM process: spawn it, read its output to the end, settle by its exit
        (or leave a relaunch pending)."""
        follow = self.follower
        cache = hf_cache_dir(self.process.env)
        command = self.redact(" ".join(self.process.argv))
        log.info("vllm.spawning", command=command, hf_cache=str(cache))
        try:
            spawned = await self.process.spawn()
        except OSError as exc:
            message = f"cannot run {self.process.argv[0]!r}: {exc.strerror or exc}"
            follow.fail(config_failure("VLLM_COMMAND", message))
            return
        finally:
            self.spawned.set()
        if not spawned:
            return
        log.info("vllm.spawned", pid=self.process.pid)
        if self.process.stop_requested:
            await self.process.kill()
        watch = DownloadWatch(cache)
        tasks = [asyncio.create_task(follow.watch(watch)), asyncio.create_task(follow.total(watch))]
        try:
            async for raw in self.process.lines():
                follow.line(raw)
            self.exit_code = await self.process.wait()
        finally:
            for task in [*tasks, *([follow.probe] if follow.probe else [])]:
                task.cancel()
            await self.process.kill()  # reap stragglers in the group, even after a clean exit
        follow.exited(self.exit_code)

    def _replace_process(self, changes: dict[str, str]) -> None:
        """A new vLLM process (and classifier, watchdog) with ``changes`` made."""
        self.args, env = relaunch.apply(self.args, self.process.env, changes)
        argv = launch.vllm_argv(self.settings, self.args)
        self.process = VllmProcess(argv, env, self.settings.shutdown_grace_s)
        if self._stop_requested:
            self.process.request_stop()
        self.classifier = Classifier(self.pack, redactor=self.redact)
        self.watchdog = Watchdog(
            self.classifier,
            self.clock(),
            self.settings.startup_timeout_s,
            self.settings.stall_timeout_s,
            self.timing.linger_after_fatal_s,
        )
        follow = self.follower
        follow.process, follow.classifier, follow.watchdog = (
            self.process,
            self.classifier,
            self.watchdog,
        )
        follow.probe = None

    def _relaunch_for(self, diagnosis: Diagnosis) -> Relaunch | None:
        """The relaunch a failure of a spawned vLLM calls for (``relaunch.decide``)."""
        if self.process.pid is None or self._stop_requested or self.effects.breaker is None:
            return None
        estimate = self.effects.info.get("estimate") or {}
        context = relaunch.context_of(
            self.settings.vllm_args,
            self.args,
            self.process.env,
            auto_relax=self.settings.auto_relax,
            weights_fit=estimate.get("weights_fit"),
            done=tuple(r["kind"] for r in self.effects.info["relaunches"]),
            breaker_allows=self.effects.breaker.allows_relaunch(),
        )
        failure = relaunch.failure_of(diagnosis, self.pack, self.lifecycle.state)
        return decide(failure, context)

    def _stop_soon(self) -> None:
        """Thread-safe: have the supervisor's loop stop vLLM's process group."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and self.process.running:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.process.kill()))
