"""worker.queue.gate: the SDK's concurrency modifier holds job intake until the supervisor
settles, then fixes the value by the state. Real supervisors (a configuration failure,
the scripted stand-in for vLLM); the SDK's own SIGTERM handler is a recorder, since
the SDK is not running here. Signal handlers are restored after each test."""

from __future__ import annotations

import io
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnostics import State
from tests.support.packs import shipped_pack
from tests.support.scripted_vllm import standin_env
from tests.support.vllm_env import group_alive
from worker.config.settings import fallback_settings, load_settings
from worker.queue.gate import JobGate
from worker.supervision.failure import config_failure
from worker.supervision.supervisor import Supervisor, Timing

PACK = shipped_pack()


@pytest.fixture(autouse=True)
def sdk_handlers() -> Iterator[list[int]]:
    """Stands in for the handlers the SDK installs; records the signals passed on."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    received: list[int] = []
    for signum in saved:
        signal.signal(signum, lambda number, _frame: received.append(number))
    yield received
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def _failed_config(tmp_path: Path) -> Supervisor:
    env = {"BASE_PATH": str(tmp_path)}
    failure = config_failure("MODEL_NAME", "no model to serve")
    return Supervisor(fallback_settings(env), PACK, env, config_failure=failure)


def _scripted(tmp_path: Path, *script: str) -> Supervisor:
    env = standin_env(tmp_path, *script)
    timing = Timing(sample_every_s=0.05)
    return Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO(), timing=timing)


def _gate(supervisor: Supervisor, config: dict, **kwargs) -> tuple[JobGate, threading.Event]:
    interrupted = threading.Event()
    transient: list[bool] = []
    gate = JobGate(supervisor, config, 7, interrupted, lambda: transient.append(True), **kwargs)
    gate.transient = transient  # type: ignore[attr-defined]
    return gate, interrupted


def test_a_settled_worker_takes_max_concurrency_jobs_and_keeps_the_value(tmp_path) -> None:
    supervisor = _failed_config(tmp_path)
    supervisor.start()
    gate, _ = _gate(supervisor, {})
    assert gate(0) == 7
    assert gate(7) == 7


def test_a_transient_failure_takes_one_job_and_asks_for_a_fresh_worker(tmp_path) -> None:
    supervisor = _scripted(tmp_path, "--say", "RuntimeError: Engine core died.", "exit:1")
    config: dict = {}
    gate, _ = _gate(supervisor, config)
    supervisor.run_in_thread()
    assert gate(0) == 1  # blocks until the supervisor settled
    assert supervisor.state is State.FAILED_TRANSIENT
    assert config["refresh_worker"] is True
    assert gate.transient == [True]  # type: ignore[attr-defined]
    assert supervisor.wait_stopped(30)


def test_intake_waits_for_readiness(tmp_path) -> None:
    supervisor = _scripted(tmp_path, "serve")
    gate, _ = _gate(supervisor, {})
    supervisor.run_in_thread()
    try:
        assert gate(0) == 7
        assert supervisor.state is State.READY
    finally:
        supervisor.request_stop()
        assert supervisor.wait_stopped(30)


def test_a_stop_before_settling_takes_no_job_and_stops_vllm(
    tmp_path, sdk_handlers, monkeypatch
) -> None:
    supervisor = _scripted(tmp_path, "hang")
    gate, interrupted = _gate(supervisor, {})
    installed = threading.Event()
    install = signal.signal

    def signal_installed(signum, handler):  # the gate chains its handlers in its first call
        previous = install(signum, handler)
        if signum == signal.SIGINT:
            installed.set()
        return previous

    monkeypatch.setattr(signal, "signal", signal_installed)
    supervisor.run_in_thread()

    def sigterm_once_chained() -> None:
        assert installed.wait(30)
        # After the spawn (on a busy machine a SIGTERM could otherwise come first, and
        # there would be no vLLM to stop); the "hang" stand-in never settles.
        assert supervisor.spawned.wait(30)
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=sigterm_once_chained)
    sender.start()
    assert gate(0) == 0  # in the main thread, as the SDK calls it
    sender.join(30)
    assert interrupted.is_set()
    assert sdk_handlers == [signal.SIGTERM]  # passed on to the SDK
    assert supervisor.wait_stopped(30)
    assert supervisor.process.pid is not None and not group_alive(supervisor.process.pid)
