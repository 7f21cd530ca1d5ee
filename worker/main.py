"""The composition root: settings, rule pack, supervisor, RunPod job loop.

Order of events:
1. read settings and the rule pack: every setting is validated first, and a bad one
   (a broken rule pack too, with the built-in pack used to run) → failed-permanent
   without starting vLLM, answered in both modes with a message naming the variable;
2. start the supervisor thread (the pre-flight, worker.preflight, may settle the start as
   failed before vLLM is spawned; else vLLM starts), handling SIGTERM/SIGINT ourselves until
   the SDK takes them over: no job is taken while vLLM starts, so jobs stay queued on
   the platform;
3. hand the main thread to the RunPod SDK at once; its concurrency modifier (the
   job gate) holds job intake until vLLM settles, then ready and failed-permanent
   serve until SIGTERM and failed-transient answers one job (or none within
   TRANSIENT_ANSWER_TIMEOUT) and exits 1;
4. whatever happens, stop vLLM's process group before exiting.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog

from diagnostics import RulePack, RulePackError, load_pack
from diagnostics.redaction.redact import Redactor
from worker.config.errors import ConfigError
from worker.config.settings import Settings, fallback_settings, load_settings
from worker.lb.mode import Mode, read_endpoint
from worker.seams import logs
from worker.supervision.failure import config_failure
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor, secrets_of
from worker.supervision.vllm_process import children_die_with_me

if TYPE_CHECKING:
    from worker.preflight import PreflightResult

# Each mode imports only its own code, inside ``main``: the LB server (uvicorn, uvloop)
# is not loaded by a queue worker, nor the job handler by an LB worker.

log = structlog.get_logger("worker")

EXIT_OK, EXIT_TRANSIENT, EXIT_RULES = 0, 1, 3


def main() -> int:
    env = dict(os.environ)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: dump stacks
    children_die_with_me()  # the SDK's heartbeat must not outlive a killed worker
    logs.configure(env, Redactor(secrets_of(env)))
    settings, config_error = _settings(env)
    endpoint, endpoint_error = read_endpoint(env)
    pack, pack_error = _pack(settings)
    if pack is None:
        return EXIT_RULES
    config_error = config_error or endpoint_error or pack_error
    for warning in settings.warnings:
        log.warning("worker.config_warning", warning=warning)
    failure = config_failure(config_error.var, config_error.message) if config_error else None
    sdk_checks = settings.job_queue and endpoint.mode is not Mode.LB  # as the SDK would
    preflight = None
    if settings.preflight and failure is None:
        preflight = _preflight(settings, pack, sdk_checks)
    supervisor = Supervisor(settings, pack, env, config_failure=failure, preflight=preflight)

    interrupted = threading.Event()
    main_pid = os.getpid()

    def on_signal(signum, _frame):
        if os.getpid() != main_pid:
            # A child forked by the SDK (its heartbeat) inherited this handler: die as usual.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        logs.from_signal_handler(
            log, "worker.signal", signal=signal.Signals(signum).name, phase="startup"
        )
        interrupted.set()
        supervisor.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # The SDK logs every job's output at DEBUG; keep its log to what operators need. Set
    # before the supervisor starts: its pre-flight may import the SDK (its host checks).
    os.environ.setdefault("RUNPOD_DEBUG_LEVEL", "INFO")
    if preflight is not None and endpoint.mode is not Mode.LB:
        # The pre-flight imports the SDK (its host checks) and huggingface_hub in the
        # supervisor's thread: import the SDK here first, not at the same time (two threads
        # importing runpod at once left one with a partially initialised module).
        from worker.queue import intake
    supervisor.start()
    if endpoint.mode is Mode.LB:  # a load-balancing endpoint: serve HTTP, no job queue
        from worker.lb import serve as lb

        return lb.run(supervisor, settings, endpoint, interrupted)
    from worker.queue import intake  # imports runpod (~0.3 s): while vLLM starts, not after ready
    from worker.queue.gate import JobGate
    from worker.queue.handler import make_handler
    from worker.queue.proxy import VllmProxy

    grace = settings.shutdown_grace_s + 5

    def proxy_factory() -> VllmProxy:
        assert supervisor.state is WorkerState.READY
        return VllmProxy(
            settings.vllm_port,
            request_timeout=settings.request_timeout_s,
            max_concurrency=settings.max_concurrency,
        )

    def exit_later() -> None:
        timer = threading.Timer(settings.transient_answer_timeout_s, _terminate_self)
        timer.daemon = True
        timer.start()

    config: dict = {
        "handler": make_handler(supervisor, proxy_factory, settings.served_model_name),
        "return_aggregate_stream": True,
    }
    supervisor.on_died = _terminate_self
    if settings.job_queue:
        # The real job loop: start the SDK now; the gate holds job intake until settled.
        config["concurrency_modifier"] = JobGate(
            supervisor,
            config,
            settings.max_concurrency,
            interrupted,
            exit_later,
            grace_s=settings.shutdown_grace_s,
            jobs_in_flight=_jobs_in_flight,
        )
    else:
        # Local modes (--rp_serve_api, --test_input) ignore the modifier: wait here.
        _wait_unless(supervisor.settled, interrupted)
    # The SDK forks its heartbeat process: never while vLLM is being spawned.
    _wait_unless(supervisor.spawned, interrupted)
    if interrupted.is_set():
        supervisor.wait_stopped(grace)
        return EXIT_OK
    try:
        intake.start(config)  # the SDK's start, with event-driven job intake
    finally:
        supervisor.request_stop()
        supervisor.wait_stopped(grace)
    return EXIT_TRANSIENT if supervisor.state is WorkerState.FAILED_TRANSIENT else EXIT_OK


def _preflight(
    settings: Settings, pack: RulePack, sdk_checks: bool
) -> Callable[[Mapping[str, str]], PreflightResult]:
    """The pre-flight the supervisor runs with vLLM's environment before the spawn; the
    SDK's host checks run there only where the SDK would run them (its job loop)."""

    def check(child_env: Mapping[str, str]) -> PreflightResult:
        from worker.preflight import run_preflight

        return run_preflight(
            settings,
            child_env,
            pack=pack,
            timeout=settings.preflight_timeout_s,
            sdk_checks=sdk_checks,
        )

    return check


def _settings(env: dict[str, str]) -> tuple[Settings, ConfigError | None]:
    """The settings, or (when they are unusable) the fallback and the error to report."""
    try:
        return load_settings(env), None
    except ConfigError as exc:
        return fallback_settings(env), exc
    except Exception as exc:  # a bug must not become a crash loop: report it to every job
        log.exception("worker.settings_crashed")
        error = ConfigError("configuration", f"the worker could not read it ({exc!r})")
        return fallback_settings(env), error


def _pack(settings: Settings) -> tuple[RulePack | None, ConfigError | None]:
    """The rule pack RULES_PATH names, or (when it cannot be loaded) the built-in pack and
    the error to answer with. None only when the built-in pack itself is broken: a bug in
    the image, not a setting (exit 3)."""
    try:
        return load_pack(settings.rules_path), None
    except Exception as exc:  # RulePackError, or anything a hostile file provokes
        if settings.rules_path is None:
            log.error("worker.rule_pack_broken", error=str(exc))
            return None, None
        reason = str(exc) if isinstance(exc, RulePackError) else f"{type(exc).__name__}: {exc}"
        log.error("worker.rule_pack_broken", error=reason)
        error = ConfigError("RULES_PATH", f"the rule pack cannot be used: {reason[:2000]}")
    try:
        return load_pack(None), error
    except Exception as exc:
        log.error("worker.rule_pack_broken", error=str(exc))
        return None, None


def _wait_unless(event: threading.Event, interrupted: threading.Event) -> None:
    """Wait for ``event``; give up as soon as a stop signal arrived."""
    while not event.wait(0.5) and not interrupted.is_set():
        pass


def exit_now(code: int) -> None:
    """Exit without waiting on the SDK's helper processes.

    The SDK leaves its heartbeat process (and a shared-memory manager) behind when its
    loop returns; interpreter shutdown would then wait on them, and it was seen to hang.
    They are stopped here, vLLM is already stopped, so nothing is left behind.
    """
    import multiprocessing

    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(timeout=2)
        if child.is_alive():
            child.kill()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _jobs_in_flight() -> int:
    from runpod.serverless.modules.worker_state import JobsProgress

    return JobsProgress().get_job_count()


def _terminate_self() -> None:
    """Ask the SDK (which owns SIGTERM once started) for its graceful stop."""
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    exit_now(main())
