"""Following one vLLM start as it goes, on the supervisor's event loop: every output
line (passed through, redacted, classified), the phases the output shows, ``/health``
once it says the server is up, the HF cache and the watchdog, and the pre-flight before
the spawn. It settles the lifecycle: a failure before ready is first offered to the
relaunch decision (``relaunch_for``: a relaunch leaves it unsettled, and the supervisor
starts vLLM again), then passes the crash-loop breaker; an exit after ready or a
requested stop ends the run. The model's size from the hub (for the progress events) is
read in a daemon thread (``in_daemon_thread``): a hub that trickles its answer never holds
the worker's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from diagnostics import Classifier, Diagnosis, State
from diagnostics.redaction.redact import Redactor
from worker.config.settings import Settings
from worker.modelinfo.hub import download_bytes
from worker.seams.downloads import DownloadWatch
from worker.supervision import health, launch
from worker.supervision.coldstart import ColdStartClock
from worker.supervision.effects import WorkerEffects
from worker.supervision.machine import Lifecycle
from worker.supervision.relaunch import Relaunch
from worker.supervision.vllm_process import VllmProcess
from worker.supervision.watchdog import LINGER_AFTER_FATAL_S, Watchdog

if TYPE_CHECKING:  # the pre-flight (the hub's schemas) loads only when it runs
    from worker.preflight import PreflightResult

log = structlog.get_logger("worker.supervisor")
T = TypeVar("T")


async def in_daemon_thread(func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in a daemon thread of its own, its result handed to this loop.

    Unlike ``asyncio.to_thread`` (the loop's default executor), nothing waits for the
    thread: neither ``asyncio.run``'s close (the supervisor's thread would not end) nor
    the interpreter's exit. For a read that may take its whole timeout (the hub's
    download size) and whose answer no one needs once the start has ended: cancelled,
    the call is left to finish on its own and its result is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:  # on the loop
        if not future.done():  # else cancelled meanwhile: the result is dropped
            setter(value)

    def call() -> None:
        setter: Callable[[Any], None] = future.set_result
        try:
            value: Any = func(*args)
        except BaseException as exc:  # handed to the awaiting task, as to_thread does
            setter, value = future.set_exception, exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
            loop.call_soon_threadsafe(settle, setter, value)

    name = f"worker-{getattr(func, '__name__', 'call')}"
    threading.Thread(target=call, name=name, daemon=True).start()
    return await future


@dataclass(frozen=True)
class Timing:
    """How often the supervisor looks (seconds); tests shorten them."""

    sample_every_s: float = 1.0  # download watch and watchdog
    progress_every_s: float = 5.0  # vllm.download_progress events
    linger_after_fatal_s: float = LINGER_AFTER_FATAL_S


class Output(Protocol):
    """Where vLLM's output is passed through (the worker's stdout)."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


class StartFollower:
    def __init__(
        self,
        settings: Settings,
        process: VllmProcess,
        classifier: Classifier,
        lifecycle: Lifecycle,
        effects: WorkerEffects,
        watchdog: Watchdog,
        cold_start: ColdStartClock,
        *,
        redact: Redactor,
        out: Output,
        clock: Callable[[], float],
        timing: Timing,
    ):
        self.settings, self.process, self.classifier = settings, process, classifier
        self.lifecycle, self.effects, self.watchdog = lifecycle, effects, watchdog
        self.cold_start, self.redact, self.out, self.clock = cold_start, redact, out, clock
        self.sample_every_s, self.progress_every_s = timing.sample_every_s, timing.progress_every_s
        self.probe: asyncio.Task[None] | None = None
        # Set by the supervisor: the relaunch a failure calls for, or None.
        self.relaunch_for: Callable[[Diagnosis], Relaunch | None] | None = None
        self.pending: Relaunch | None = None  # decided; applied once this vLLM exited

    @property
    def state(self) -> State:
        return self.lifecycle.state

    def line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        redacted = self.redact(text)
        with contextlib.suppress(OSError, ValueError):
            self.out.write(redacted.encode("utf-8", "replace") if redacted != text else raw)
            self.out.flush()
        if self.pending is not None:  # this vLLM is being replaced: its output is passed on
            return
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
            if self.probe is None or self.probe.done():
                self.probe = asyncio.ensure_future(self._wait_healthy())
        elif phase is State.LOADING and self.state in (State.STARTING, State.DOWNLOADING):
            self.lifecycle.loading_started()
        elif phase is State.DOWNLOADING and self.state in (State.STARTING, State.LOADING):
            self.lifecycle.download_started()

    async def _wait_healthy(self) -> None:
        def keep_trying() -> bool:
            return self.process.running and not self.lifecycle.settled

        if await health.wait_healthy(self.settings.vllm_port, keep_trying) and keep_trying():
            length = await health.served_max_model_len(self.settings.vllm_port)
            if length is not None:
                self.effects.info["max_model_len"] = length
                self.effects.summary_extra["max_model_len"] = length
                log.info("worker.max_model_len", max_model_len=length, source="vllm")
            if keep_trying():
                self.lifecycle.became_ready()

    async def watch(self, watch: DownloadWatch) -> None:
        """Every ``sample_every_s``: download progress, then the watchdog."""
        last_report = -self.progress_every_s
        while True:
            await asyncio.sleep(self.sample_every_s)
            now = self.clock()
            progress = await asyncio.to_thread(watch.sample, now)
            if progress.active:
                self.watchdog.activity(now)
                if self.state in (State.STARTING, State.LOADING):
                    self.lifecycle.download_started()
                if now - last_report >= self.progress_every_s:
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
                    self.fail(verdict)

    async def total(self, watch: DownloadWatch) -> None:
        """The model's size from the hub, for the progress events (None when unknown)."""
        repo = launch.hub_model(self.settings, self.process.env)
        if repo is not None:
            env = self.process.env
            endpoint, token = env.get("HF_ENDPOINT"), env.get("HF_TOKEN")
            watch.total_bytes = await in_daemon_thread(download_bytes, *repo, endpoint, token)

    async def predicted_failure(
        self, preflight: Callable[[Mapping[str, str]], PreflightResult]
    ) -> bool:
        """Run the pre-flight (in a daemon thread: an exit never waits for it); True when it
        settled the start as failed (vLLM is not spawned). Its crash never stops a launch."""
        try:
            result = await in_daemon_thread(preflight, self.process.env)
        except Exception:
            log.exception("worker.preflight_crashed")
            return False
        summary = result.summary()
        self.effects.summary_extra["preflight_s"] = summary["preflight_s"]
        log.info("worker.preflight", **summary)
        if result.plan:
            self.effects.info["estimate"] = dict(result.plan)
            log.info("preflight.estimate", **result.plan)
        if result.diagnosis is None or self.process.stop_requested:
            return False
        self.fail(result.diagnosis)
        return True

    def fail(self, diagnosis: Diagnosis) -> None:
        """Settle as failed (a settled start stays so, unless it failed after ready)."""
        if self.pending is not None or (self.lifecycle.settled and self.state is not State.READY):
            return
        if self.state is not State.READY and self.relaunch_for is not None:
            relaunch = self.relaunch_for(diagnosis)
            if relaunch is not None:
                self.pending = relaunch
                self.effects.relaunching(relaunch, diagnosis)
                self.lifecycle.relaunch()
                return
        if self.state is not State.READY and self.effects.breaker is not None:
            diagnosis = self.effects.breaker.judge(diagnosis)
        self.lifecycle.fail(diagnosis)

    def exited(self, code: int | None) -> None:
        requested = self.process.stop_requested
        log.info("vllm.exited", exit_code=code, requested=requested)
        if self.pending is not None and not requested:
            return  # the supervisor relaunches
        running = not self.lifecycle.settled or self.state is State.READY
        if requested and running:
            self.lifecycle.stop()
        elif running:
            self.fail(self.classifier.diagnosis(exit_code=code))
