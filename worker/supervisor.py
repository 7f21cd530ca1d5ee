"""The supervisor: follows one vLLM start to a settled state and stops it on request.

It owns the parts and wires them: the process (``worker.vllm_process``: spawn, drain,
kill its group), the classifier that reads every line, the lifecycle and its effects
(``worker.machine``, ``worker.effects``), the watchdog (``worker.watchdog``: fatal wait,
startup and stall limits), the health probe (``worker.health``), the download watch
and the crash-loop breaker (``worker.crash_loop``). It runs on its own asyncio loop in
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
from dataclasses import dataclass
from typing import BinaryIO

import structlog

from diagnostics import Category, Classifier, Diagnosis, Evidence, RulePack, State
from diagnostics.redact import Redactor
from diagnostics.secrets import secret_values
from worker import health, launch
from worker.coldstart import ColdStartClock, timing_markers
from worker.crash_loop import CrashLoopBreaker
from worker.downloads import DownloadWatch, hf_cache_dir, hub_total_bytes
from worker.effects import WorkerEffects
from worker.machine import SETTLED, Lifecycle
from worker.preflight import PreflightResult
from worker.settings import Settings
from worker.vllm_process import VllmProcess
from worker.watchdog import LINGER_AFTER_FATAL_S, Watchdog

log = structlog.get_logger("worker.supervisor")



@dataclass(frozen=True)
class Timing:
    """How often the supervisor looks (seconds); tests shorten them."""

    sample_every_s: float = 1.0  # download watch and watchdog
    progress_every_s: float = 5.0  # vllm.download_progress events
    linger_after_fatal_s: float = LINGER_AFTER_FATAL_S


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
    return secret_values(env)  # the one rule: diagnostics.secrets


class Supervisor:
    """Starts vLLM and follows it to a settled state; stops it on request."""

    def __init__(
        self,
        settings: Settings,
        pack: RulePack,
        env: Mapping[str, str],
        *,
        config_failure: Diagnosis | None = None,
        passthrough: BinaryIO | None = None,
        on_settled: Callable[[State], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        timing: Timing | None = None,
        preflight: Callable[[Mapping[str, str]], PreflightResult] | None = None,
    ):
        self.settings = settings
        self.redact = Redactor(secrets_of(env))
        self.classifier = Classifier(pack, redactor=self.redact)
        self.clock, self.timing = clock, timing or Timing()
        self.exit_code: int | None = None
        self._config_failure = config_failure
        self._preflight = preflight  # judged with vLLM's environment before the spawn
        self._out = passthrough if passthrough is not None else sys.stdout.buffer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probe: asyncio.Task[None] | None = None
        self.process = VllmProcess(
            launch.vllm_argv(settings), launch.vllm_env(settings, env), settings.shutdown_grace_s
        )
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
        if on_settled is not None:
            self.effects.observers.append(lambda s: on_settled(s) if s in SETTLED else None)
        self.lifecycle = Lifecycle(self.effects)
        self.settled = self.effects.settled
        self.stopped = threading.Event()
        # Set once vLLM has been spawned (or will not be). Anything that forks in this
        # process (the RunPod SDK's heartbeat) must wait for it: a fork during the spawn
        # inherits the spawn's exec-status pipe and leaves the spawn waiting forever.
        self.spawned = threading.Event()

    # -- read from other threads

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
                self._fail(self.classifier.diagnosis(exited=True))
        finally:
            self.spawned.set()
            self.stopped.set()

    async def run(self) -> None:
        """Spawn vLLM, read its output to the end, settle by its exit."""
        self._loop = asyncio.get_running_loop()
        if self._preflight is not None and await self._predicted_failure():
            return
        cache = hf_cache_dir(self.process.env)
        command = self.redact(" ".join(self.process.argv))
        log.info("vllm.spawning", command=command, hf_cache=str(cache))
        try:
            spawned = await self.process.spawn()
        except OSError as exc:
            message = f"cannot run {self.process.argv[0]!r}: {exc.strerror or exc}"
            self._fail(config_failure("VLLM_COMMAND", message))
            return
        finally:
            self.spawned.set()
        if not spawned:
            return
        log.info("vllm.spawned", pid=self.process.pid)
        if self.process.stop_requested:
            await self.process.kill()
        watch = DownloadWatch(cache)
        tasks = [asyncio.create_task(self._watch(watch)), asyncio.create_task(self._total(watch))]
        try:
            async for raw in self.process.lines():
                self._line(raw)
            self.exit_code = await self.process.wait()
        finally:
            for task in [*tasks, *([self._probe] if self._probe else [])]:
                task.cancel()
            await self.process.kill()  # reap stragglers in the group, even after a clean exit
        self._exited(self.exit_code)

    async def _predicted_failure(self) -> bool:
        """Run the pre-flight (worker.preflight); True when it settled the start as failed,
        so vLLM is not spawned. A crash of the pre-flight itself never stops a launch."""
        assert self._preflight is not None
        try:
            result = await asyncio.to_thread(self._preflight, self.process.env)
        except Exception:
            log.exception("worker.preflight_crashed")
            return False
        summary = result.summary()
        self.effects.summary_extra["preflight_s"] = summary["preflight_s"]
        log.info("worker.preflight", **summary)
        if result.diagnosis is None or self.process.stop_requested:
            return False
        self.spawned.set()
        self._fail(result.diagnosis)
        return True

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        redacted = self.redact(text)
        with contextlib.suppress(OSError, ValueError):
            self._out.write(redacted.encode("utf-8", "replace") if redacted != text else raw)
            self._out.flush()
        now = self.clock()
        self.watchdog.activity(now)
        self.cold_start.line(text)
        phase = self.classifier.feed(text)
        if phase is not None:
            self._phase(phase, now)
        if self.classifier.failure_seen and self.state is not State.READY:
            self.watchdog.fatal_seen(now)

    def _phase(self, phase: State, now: float) -> None:
        if phase is State.READY and self.effects.ready_line_at is None:
            self.effects.ready_line_at = now
        if self.lifecycle.settled:
            return
        if phase is State.READY:
            if self._probe is None or self._probe.done():
                self._probe = asyncio.ensure_future(self._wait_healthy())
        elif phase is State.LOADING and self.state in (State.STARTING, State.DOWNLOADING):
            self.lifecycle.loading_started()
        elif phase is State.DOWNLOADING and self.state in (State.STARTING, State.LOADING):
            self.lifecycle.download_started()

    async def _wait_healthy(self) -> None:
        def keep_trying() -> bool:
            return self.process.running and not self.lifecycle.settled

        if await health.wait_healthy(self.settings.vllm_port, keep_trying) and keep_trying():
            self.lifecycle.became_ready()

    async def _watch(self, watch: DownloadWatch) -> None:
        """Every ``sample_every_s``: download progress, then the watchdog."""
        last_report = -self.timing.progress_every_s
        while True:
            await asyncio.sleep(self.timing.sample_every_s)
            now = self.clock()
            progress = await asyncio.to_thread(watch.sample, now)
            if progress.active:
                self.watchdog.activity(now)
                if self.state in (State.STARTING, State.LOADING):
                    self.lifecycle.download_started()
                if now - last_report >= self.timing.progress_every_s:
                    last_report = now
                    log.info(
                        "vllm.download_progress",
                        bytes=progress.bytes_done,
                        total_bytes=progress.total_bytes,
                        rate_mb_s=round(progress.rate_bps / 1e6, 2),
                    )
            if not self.lifecycle.settled:
                verdict = self.watchdog.check(now, self.state)
                if verdict is not None:
                    self._fail(verdict)

    async def _total(self, watch: DownloadWatch) -> None:
        """The model's size from the hub, for the progress events (None when unknown)."""
        repo = launch.hub_model(self.settings, self.process.env)
        if repo is not None:
            env = self.process.env
            endpoint, token = env.get("HF_ENDPOINT"), env.get("HF_TOKEN")
            watch.total_bytes = await asyncio.to_thread(hub_total_bytes, *repo, endpoint, token)

    def _fail(self, diagnosis: Diagnosis) -> None:
        if self.lifecycle.settled and self.state is not State.READY:
            return
        if self.state is not State.READY and self.effects.breaker is not None:
            diagnosis = self.effects.breaker.judge(diagnosis)
        self.lifecycle.fail(diagnosis)

    def _exited(self, code: int | None) -> None:
        requested = self.process.stop_requested
        log.info("vllm.exited", exit_code=code, requested=requested)
        running = not self.lifecycle.settled or self.state is State.READY
        if requested and running:
            self.lifecycle.stop()
        elif running:
            self._fail(self.classifier.diagnosis(exit_code=code))

    def _stop_soon(self) -> None:
        """Thread-safe: have the supervisor's loop stop vLLM's process group."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and self.process.running:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.process.kill()))
