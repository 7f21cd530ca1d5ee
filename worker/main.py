"""The composition root: settings, rule pack, supervisor, RunPod job loop.

Order of events:
1. read settings and the rule pack (a bad setting → failed-permanent without starting
   vLLM; a broken rule pack → exit 3);
2. start the supervisor thread (vLLM starts) and wait until it settles, handling
   SIGTERM/SIGINT ourselves meanwhile: no job is taken while vLLM starts, so jobs stay
   queued on the platform;
3. hand the main thread to the RunPod SDK with the handler for the settled state:
   ready and failed-permanent serve until SIGTERM; failed-transient answers one job
   (or none within TRANSIENT_ANSWER_TIMEOUT) and exits 1;
4. whatever happens, stop vLLM's process group before exiting.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import structlog

from diagnostics import RulePackError, load_pack
from diagnostics.redact import Redactor
from worker import logs
from worker.errors import ConfigError
from worker.handler import make_handler
from worker.machine import WorkerState
from worker.proxy import VllmProxy
from worker.settings import load_settings
from worker.supervisor import Supervisor, config_failure, secrets_of

log = structlog.get_logger("worker")

EXIT_OK, EXIT_TRANSIENT, EXIT_RULES = 0, 1, 3


def main() -> int:
    env = dict(os.environ)
    logs.configure(env, Redactor(secrets_of(env)))
    # The SDK logs every job's output at DEBUG; keep its log to what operators need.
    os.environ.setdefault("RUNPOD_DEBUG_LEVEL", "INFO")
    import runpod  # slow import (~1.5 s): done while vLLM starts, not after it is ready

    try:
        pack = load_pack(env.get("RULES_PATH") or None)
    except RulePackError as exc:
        log.error("worker.rule_pack_broken", error=str(exc))
        return EXIT_RULES

    try:
        settings = load_settings(env)
        config_error = None
    except ConfigError as exc:
        settings, config_error = None, exc
    except Exception as exc:  # a bug must not become a crash loop: report it to every job
        log.exception("worker.settings_crashed")
        settings = None
        config_error = ConfigError("configuration", f"the worker could not read it ({exc!r})")
    if settings is not None:
        for warning in settings.warnings:
            log.warning("worker.config_warning", warning=warning)
        supervisor = Supervisor(settings, pack, env)
    else:
        supervisor = Supervisor.unlaunched(pack, env)

    interrupted = threading.Event()
    main_pid = os.getpid()

    def on_signal(signum, _frame):
        if os.getpid() != main_pid:
            # A child forked by the SDK (its heartbeat) inherited this handler: die as usual.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        log.info("worker.signal", signal=signal.Signals(signum).name, phase="startup")
        interrupted.set()
        supervisor.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if config_error is not None:
        supervisor.lifecycle.fail(config_failure(config_error.var, str(config_error.message)))
    else:
        supervisor.run_in_thread()
    while not supervisor.settled.wait(0.5) and not interrupted.is_set():
        pass
    if interrupted.is_set():
        supervisor.wait_stopped(settings.shutdown_grace_s + 5 if settings else 5)
        return EXIT_OK

    state = supervisor.state
    served = settings.served_model_name if settings else ""
    config: dict = {"handler": None, "return_aggregate_stream": True}
    if state is WorkerState.READY:
        assert settings is not None

        def proxy_factory() -> VllmProxy:
            return VllmProxy(
                settings.vllm_port,
                request_timeout=settings.request_timeout_s,
                max_concurrency=settings.max_concurrency,
            )

        concurrency = settings.max_concurrency
        config["handler"] = make_handler(supervisor, proxy_factory, served)
        config["concurrency_modifier"] = lambda _current: concurrency
        supervisor.on_died = _terminate_self
    elif state is WorkerState.FAILED_PERMANENT:
        config["handler"] = make_handler(supervisor, _no_proxy, served)
        concurrency = settings.max_concurrency if settings else 30
        config["concurrency_modifier"] = lambda _current: concurrency
    else:  # failed-transient: answer one job, then exit so the platform retries
        config["handler"] = make_handler(supervisor, _no_proxy, served)
        config["refresh_worker"] = True
        config["concurrency_modifier"] = lambda _current: 1
        timeout = settings.transient_answer_timeout_s if settings else 30.0
        timer = threading.Timer(timeout, _terminate_self)
        timer.daemon = True
        timer.start()

    try:
        runpod.serverless.start(config)
    finally:
        supervisor.request_stop()
        supervisor.wait_stopped(settings.shutdown_grace_s + 5 if settings else 5)
    return EXIT_TRANSIENT if supervisor.state is WorkerState.FAILED_TRANSIENT else EXIT_OK


def _no_proxy() -> VllmProxy:
    raise AssertionError("no proxy outside the ready state")


def _terminate_self() -> None:
    """Ask the SDK (which owns SIGTERM once started) for its graceful stop."""
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
