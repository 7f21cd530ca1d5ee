"""The supervisor: the single owner of the vLLM process.

It launches vLLM in its own process group, always drains its output (passing every
line through to our stdout, secrets redacted, and feeding it to the classifier),
watches the HF cache for silent downloads, probes ``/health`` as soon as the output
says the server is up, enforces the startup and stall limits, and drives the
``Lifecycle`` machine. It runs on its own asyncio loop in a background thread so the
RunPod SDK can own the main thread; other threads read ``state`` and wait on
``settled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import BinaryIO

import httpx
import structlog

from diagnostics import Category, Classifier, Diagnosis, Evidence, RulePack, State
from diagnostics.redact import Redactor
from worker.breaker import LEDGER_NAME, RestartLedger, config_key, judge
from worker.coldstart import ColdStartClock
from worker.downloads import DownloadWatch, hf_cache_dir, hub_total_bytes
from worker.machine import SETTLED, Lifecycle, WorkerState
from worker.owned import HIDDEN_ENV
from worker.settings import Settings

log = structlog.get_logger("worker.supervisor")

MAX_LINE = 1 << 20  # longer "lines" are cut into pieces of this size
PROGRESS_EVERY_S = 5.0
SAMPLE_EVERY_S = 1.0
LINGER_AFTER_FATAL_S = 20.0
_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "RUNPOD_AI_API_KEY", "RUNPOD_API_KEY")


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
    return [
        value
        for name, value in env.items()
        if value and (name in _SECRET_ENV or name.endswith(("_TOKEN", "_SECRET", "_PASSWORD")))
    ]


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
        on_settled: Callable[[WorkerState], None] | None = None,
    ):
        self.settings = settings
        self.env = dict(env)
        self.redact = Redactor(secrets_of(env))
        self.classifier = Classifier(pack, redactor=self.redact)
        self.lifecycle = Lifecycle(self)
        self.settled = threading.Event()
        self.stopped = threading.Event()
        # Set once vLLM has been spawned (or will not be). Anything that forks in this
        # process (the RunPod SDK's heartbeat) must wait for it: a fork during the spawn
        # inherits the spawn's exec-status pipe and leaves the spawn waiting forever.
        self.spawned = threading.Event()
        self._on_settled = on_settled
        self._out = passthrough if passthrough is not None else sys.stdout.buffer
        self._proc: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._clock = ColdStartClock(time.monotonic())
        self._last_activity = time.monotonic()
        self._startup_complete_at: float | None = None
        self._probe_task: asyncio.Task | None = None
        self._fatal_seen_at: float | None = None
        self.exit_code: int | None = None
        self.on_died: Callable[[], None] | None = None
        self.ledger = RestartLedger(None, time.time)
        self._config_failure = config_failure
        if config_failure is not None:  # configuration failed: vLLM is never launched
            self.stopped.set()
            self.spawned.set()
        else:
            self._key = config_key(settings.vllm_command, settings.vllm_args)
            base = settings.base_path
            if base.is_dir() and os.access(base, os.W_OK):
                self.ledger = RestartLedger(base / LEDGER_NAME, time.time)
            else:
                log.info("breaker.disabled", reason=f"BASE_PATH {base} is not a writable folder")
            if settings.crash_loop_reset:
                self.ledger.clear(self._key)

    def start(self) -> None:
        """Start vLLM in a background thread, or settle at once on a configuration failure."""
        if self._config_failure is not None:
            self.lifecycle.fail(self._config_failure)
        else:
            self.run_in_thread()

    # -- reading state from other threads

    @property
    def state(self) -> WorkerState:
        return self.lifecycle.state

    @property
    def diagnosis(self) -> Diagnosis | None:
        return self.lifecycle.diagnosis

    def tail(self, count: int = 60) -> list[str]:
        return self.classifier.tail(count)

    # -- Effects (called by the Lifecycle)

    def state_changed(self, source: WorkerState, dest: WorkerState) -> None:
        now = time.monotonic()
        spent = self._clock.enter(dest.value, now)
        log.info(
            "worker.state_changed",
            source=source.value,
            dest=dest.value,
            seconds_in_source=round(spent, 2),
        )
        if dest in SETTLED:
            self.settled.set()
            if self._on_settled is not None:
                self._on_settled(dest)
        if source is WorkerState.READY and dest is WorkerState.FAILED_TRANSIENT and self.on_died:
            self.on_died()

    def ready(self) -> None:
        self.ledger.clear(self._key)
        now = time.monotonic()
        fields = self._clock.summary(now)
        if self._startup_complete_at is not None:
            fields["ready_after_startup_line_ms"] = round(
                (now - self._startup_complete_at) * 1000, 1
            )
        log.info("vllm.cold_start", **fields)

    def failed(self, diagnosis: Diagnosis) -> None:
        log.error(
            "worker.failed",
            state=self.state.value,
            category=str(diagnosis.category),
            rule=diagnosis.rule,
            message=diagnosis.message,
            evidence_line=diagnosis.evidence.line if diagnosis.evidence else None,
            evidence=diagnosis.evidence.text if diagnosis.evidence else None,
        )
        if self._loop is not None and self._proc is not None and self._proc.returncode is None:
            self._loop.call_soon(lambda: asyncio.ensure_future(self._kill()))

    # -- running

    def run_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self._thread_main, name="vllm-supervisor", daemon=True)
        thread.start()
        return thread

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

    def request_stop(self) -> None:
        """Thread-safe: stop vLLM (SIGTERM to its group, SIGKILL after the grace period)."""
        self._stop_requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._kill()))

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self.stopped.wait(timeout)

    async def run(self) -> None:
        assert self.settings is not None
        self._loop = asyncio.get_running_loop()
        argv = [
            *self.settings.vllm_command,
            *self.settings.vllm_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.settings.vllm_port),
        ]
        env = self._child_env()
        cache = hf_cache_dir(env)
        watch = DownloadWatch(cache)
        log.info("vllm.spawning", command=self.redact(" ".join(argv)), hf_cache=str(cache))
        if self._stop_requested:
            self.spawned.set()
            return
        try:
            self._proc = await self._spawn(argv, env)
        except OSError as exc:
            self._fail(
                config_failure("VLLM_COMMAND", f"cannot run {argv[0]!r}: {exc.strerror or exc}")
            )
            return
        finally:
            self.spawned.set()
        log.info("vllm.spawned", pid=self._proc.pid)
        _widen_pipe(self._proc)
        if self._stop_requested:
            await self._kill()
        tasks = [
            asyncio.create_task(self._watchdog(watch)),
            asyncio.create_task(self._fetch_total(watch, env)),
        ]
        try:
            await self._read_output()
            self.exit_code = await self._proc.wait()
        finally:
            for task in tasks:
                task.cancel()
            if self._probe_task is not None:
                self._probe_task.cancel()
            await self._kill()  # reap stragglers in the group, even after a clean exit
        self._on_exit(self.exit_code)

    async def _spawn(self, argv: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def _child_env(self) -> dict[str, str]:
        assert self.settings is not None
        env = {k: v for k, v in self.env.items() if k not in HIDDEN_ENV}
        base = self.settings.base_path
        if base.is_dir() and os.access(base, os.W_OK):
            env.setdefault("HF_HOME", str(base / "huggingface-cache"))
            env.setdefault("VLLM_CACHE_ROOT", str(base / "vllm-cache"))
        if self.settings.offline:
            env["HF_HUB_OFFLINE"] = "1"
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    async def _fetch_total(self, watch: DownloadWatch, env: dict[str, str]) -> None:
        model = self.settings.model
        if (
            self.settings.offline
            or env.get("HF_HUB_OFFLINE") == "1"
            or not model
            or os.path.exists(model)
        ):
            return
        revision = _arg_value(self.settings.vllm_args, "--revision")
        watch.total_bytes = await asyncio.to_thread(
            hub_total_bytes, model, revision, env.get("HF_ENDPOINT"), env.get("HF_TOKEN")
        )

    async def _read_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        buffer = b""
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                break
            buffer += chunk
            while True:
                cut = buffer.find(b"\n")
                if cut < 0:
                    if len(buffer) >= MAX_LINE:
                        self._line(buffer[:MAX_LINE])
                        buffer = buffer[MAX_LINE:]
                        continue
                    break
                self._line(buffer[: cut + 1])
                buffer = buffer[cut + 1 :]
        if buffer:
            self._line(buffer)

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        redacted = self.redact(text)
        with contextlib.suppress(OSError, ValueError):
            self._out.write(redacted.encode("utf-8", "replace") if redacted != text else raw)
            self._out.flush()
        self._last_activity = time.monotonic()
        self._clock.line(text)
        phase = self.classifier.feed(text)
        if self._startup_complete_at is None and "Application startup complete" in text:
            self._startup_complete_at = time.monotonic()
        if phase is not None:
            self._phase(phase)
        if (
            self._fatal_seen_at is None
            and self.classifier.failure_seen
            and self.state is not WorkerState.READY
        ):
            self._fatal_seen_at = time.monotonic()

    def _phase(self, phase: State) -> None:
        if self.lifecycle.settled:
            return
        if phase is State.READY:
            if self._probe_task is None or self._probe_task.done():
                self._probe_task = asyncio.ensure_future(self._probe())
        elif phase is State.LOADING and self.state in (
            WorkerState.STARTING,
            WorkerState.DOWNLOADING,
        ):
            self.lifecycle.loading_started()
        elif phase is State.DOWNLOADING and self.state in (
            WorkerState.STARTING,
            WorkerState.LOADING,
        ):
            self.lifecycle.download_started()

    async def _probe(self) -> None:
        url = f"http://127.0.0.1:{self.settings.vllm_port}/health"
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=2.0)) as client:
            while (
                self._proc is not None
                and self._proc.returncode is None
                and not self.lifecycle.settled
            ):
                try:
                    response = await client.get(url)
                    if response.status_code == 200:
                        if not self.lifecycle.settled:
                            self.lifecycle.became_ready()
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.02)  # a retry interval, not a synchronisation

    async def _watchdog(self, watch: DownloadWatch) -> None:
        last_report = 0.0
        while True:
            await asyncio.sleep(SAMPLE_EVERY_S)
            now = time.monotonic()
            progress = await asyncio.to_thread(watch.sample, now)
            if progress.active:
                self._last_activity = now
                if self.state in (WorkerState.STARTING, WorkerState.LOADING):
                    self.lifecycle.download_started()
                if now - last_report >= PROGRESS_EVERY_S:
                    last_report = now
                    log.info(
                        "vllm.download_progress",
                        bytes=progress.bytes_done,
                        total_bytes=progress.total_bytes,
                        rate_mb_s=round(progress.rate_bps / 1e6, 2),
                    )
            if self.lifecycle.settled:
                continue
            started = self._clock.started
            if self._fatal_seen_at is not None and now - self._fatal_seen_at > LINGER_AFTER_FATAL_S:
                self._fail(self.classifier.diagnosis(exited=True))
            elif now - started > self.settings.startup_timeout_s:
                limit = self.settings.startup_timeout_s
                self._fail(
                    self._timeout(
                        f"vLLM did not become ready within VLLM_STARTUP_TIMEOUT={limit:g} s "
                        f"(it was {self.state.value})"
                    )
                )
            elif now - self._last_activity > self.settings.stall_timeout_s:
                limit = self.settings.stall_timeout_s
                self._fail(
                    self._timeout(
                        f"vLLM stalled while {self.state.value}: no output and no download "
                        f"progress for VLLM_STALL_TIMEOUT={limit:g} s"
                    )
                )

    def _timeout(self, cause: str) -> Diagnosis:
        return Diagnosis(
            state=State.FAILED_TRANSIENT,
            category=Category.OTHER,
            rule="startup-timeout",
            evidence=self.classifier.diagnosis(exited=True).evidence,
            cause=cause + ".",
            fix="A restart may help. For very large models raise VLLM_STARTUP_TIMEOUT / "
            "VLLM_STALL_TIMEOUT, or attach a network volume so the download is not repeated.",
        )

    def _fail(self, diagnosis: Diagnosis) -> None:
        if self.lifecycle.settled and self.state is not WorkerState.READY:
            return
        if self.state is WorkerState.READY:
            self.lifecycle.diagnosis = diagnosis
            self.lifecycle.failed_transiently()
            return
        if self._config_failure is None and diagnosis.permanent is False:
            s = self.settings
            history = self.ledger.recent(self._key, s.crash_loop_window_s)
            where = str(self.ledger.path) if self.ledger.path else LEDGER_NAME
            judged = judge(diagnosis, history, s.crash_loop_limit, s.crash_loop_window_s, where)
            self.ledger.record(self._key, str(diagnosis.category), s.crash_loop_window_s)
            diagnosis = judged
        self.lifecycle.fail(diagnosis)

    def _on_exit(self, code: int | None) -> None:
        log.info("vllm.exited", exit_code=code, requested=self._stop_requested)
        running = not self.lifecycle.settled or self.state is WorkerState.READY
        if self._stop_requested and running:
            self.lifecycle.stop()
        elif not self.lifecycle.settled or self.state is WorkerState.READY:
            self._fail(self.classifier.diagnosis(exit_code=code))

    async def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.settings.shutdown_grace_s)
            except TimeoutError:
                log.warning(
                    "vllm.kill",
                    reason="did not stop within the grace period",
                    grace_s=self.settings.shutdown_grace_s,
                )
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        if proc.returncode is None:
            await proc.wait()


def _widen_pipe(proc: asyncio.subprocess.Process) -> None:
    """Give vLLM's stdout pipe 1 MiB (Linux) so bursts never wait for our reader."""
    with contextlib.suppress(Exception):
        pipe = proc._transport.get_pipe_transport(1).get_extra_info("pipe")  # type: ignore[attr-defined]
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)


def _arg_value(args: list[str], flag: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
