"""The supervisor's limits and exits, with a scripted stand-in for vLLM
(tests/support/scripted_vllm.py) instead of a real start: the stall limit, the startup
limit, the wait after a fatal line, vLLM dying after ready, and a requested stop. Each
runs in about a second; the timings (sample interval, fatal wait) are shortened through
the supervisor's ``Timing``. A real vLLM cannot be made to stall or die on cue; what
only vLLM can show stays in tests/integration."""

from __future__ import annotations

import io
import json
import shlex
import threading
from pathlib import Path

import httpx
import pytest

from diagnostics import Category, State
from tests.support.packs import shipped_pack
from tests.support.scripted_vllm import standin_env
from tests.support.supervising import FAST, settle, stop, stuck
from tests.support.vllm_env import ROOT, stand_in_argv
from worker.config.settings import fallback_settings, load_settings
from worker.supervision.failure import config_failure
from worker.supervision.supervisor import Supervisor

PACK = shipped_pack()
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.25 GiB of which 1.12 GiB is free."
)


def _supervisor(tmp_path: Path, script: list[str], **extra: str) -> Supervisor:
    env = standin_env(tmp_path, *script, **extra)
    return Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO(), timing=FAST)


def test_silence_while_loading_is_a_stall(tmp_path):
    supervisor = _supervisor(
        tmp_path,
        ["--say", "INFO Starting to load model stand-in", "hang"],
        # Long enough for the stand-in's own start on a busy machine (at 0.3 s its
        # silence before the first line was the stall, under load).
        VLLM_STALL_TIMEOUT="2",
    )
    assert settle(supervisor) is State.FAILED_TRANSIENT
    stop(supervisor)
    diagnosis = supervisor.diagnosis
    assert diagnosis is not None and diagnosis.rule == "startup-timeout"
    assert "stalled while loading" in str(diagnosis.cause)
    assert "VLLM_STALL_TIMEOUT=2" in str(diagnosis.cause)


def test_output_without_progress_hits_the_startup_limit(tmp_path):
    supervisor = _supervisor(tmp_path, ["chatter"], VLLM_STARTUP_TIMEOUT="0.5")
    assert settle(supervisor) is State.FAILED_TRANSIENT
    stop(supervisor)
    assert supervisor.diagnosis is not None
    assert "VLLM_STARTUP_TIMEOUT=0.5" in str(supervisor.diagnosis.cause)
    assert "it was starting" in str(supervisor.diagnosis.cause)


def test_a_fatal_line_then_a_hang_settles_after_the_wait(tmp_path):
    """vLLM sometimes hangs after its fatal error: the output's diagnosis is taken once the
    fatal wait is over, without waiting for the stall limit."""
    supervisor = _supervisor(tmp_path, ["--say", OOM, "hang"])
    assert settle(supervisor) is State.FAILED_PERMANENT
    stop(supervisor)
    assert supervisor.diagnosis is not None
    assert (supervisor.diagnosis.category, supervisor.diagnosis.rule) == (
        Category.OOM,
        "cuda-oom-allocate",
    )


def test_vllm_dying_after_ready_fails_transiently_and_says_so(tmp_path):
    supervisor = _supervisor(tmp_path, ["serve"])
    died = threading.Event()
    supervisor.on_died = died.set
    seen: list[State] = []
    supervisor.effects.observers.append(seen.append)
    assert settle(supervisor) is State.READY
    httpx.get(f"http://127.0.0.1:{supervisor.settings.vllm_port}/die")
    assert died.wait(30)
    assert supervisor.wait_stopped(30), stuck(supervisor)
    assert supervisor.state is State.FAILED_TRANSIENT
    assert seen == [State.READY, State.FAILED_TRANSIENT]
    assert supervisor.diagnosis is not None and supervisor.exit_code == 1


def test_a_requested_stop_while_ready_ends_stopped(tmp_path):
    supervisor = _supervisor(tmp_path, ["serve"])
    assert settle(supervisor) is State.READY
    stop(supervisor)
    assert supervisor.state is State.STOPPED
    assert supervisor.diagnosis is None


def test_a_command_that_cannot_run_is_a_configuration_failure(tmp_path):
    env = {
        "MODEL_NAME": "m",
        "VLLM_COMMAND": str(tmp_path / "no-such-vllm"),
        "BASE_PATH": str(tmp_path),
    }
    supervisor = Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO())
    assert settle(supervisor) is State.FAILED_PERMANENT
    assert supervisor.diagnosis is not None and supervisor.diagnosis.rule == "invalid-setting"
    assert "VLLM_COMMAND" in str(supervisor.diagnosis.message)


def test_a_configuration_failure_settles_without_a_process(tmp_path):
    env = {"MAX_CONCURRENCY": "lots", "BASE_PATH": str(tmp_path)}
    failure = config_failure("MAX_CONCURRENCY", "expected an integer")
    supervisor = Supervisor(
        fallback_settings(env), PACK, env, config_failure=failure, passthrough=io.BytesIO()
    )
    supervisor.start()
    assert supervisor.settled.is_set() and supervisor.stopped.is_set()
    assert supervisor.state is State.FAILED_PERMANENT
    assert supervisor.process.pid is None


def test_the_third_transient_failure_in_a_row_trips_the_breaker(tmp_path):
    volume = tmp_path / "volume"
    volume.mkdir()
    states = []
    for _ in range(3):
        supervisor = _supervisor(
            tmp_path,
            ["--say", "RuntimeError: Engine core initialization failed.", "exit:1"],
            BASE_PATH=str(volume),
            CRASH_LOOP_LIMIT="2",
        )
        states.append(settle(supervisor))
        stop(supervisor)
    assert states == [State.FAILED_TRANSIENT, State.FAILED_TRANSIENT, State.FAILED_PERMANENT]
    assert supervisor.diagnosis is not None and supervisor.diagnosis.rule == "crash-loop-breaker"


def _recorded() -> list[dict]:
    manifest = ROOT / "fixtures" / "vllm-0.32" / "manifest.jsonl"
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["category"] != "ok" and row["permanent"] is not None]


@pytest.mark.parametrize("row", _recorded(), ids=lambda row: row["file"])
def test_recorded_vllm_failures_settle_by_their_category(tmp_path, row):
    """Each failed start recorded from the real vLLM 0.32 (CPU build) here, replayed
    through the supervisor with its exit code: the state and category the manifest
    holds. (tests/integration/test_supervisor_vllm.py starts real vLLM for a few.)"""
    fixture = ROOT / "fixtures" / "vllm-0.32" / row["file"]
    command = stand_in_argv("replay_log", str(fixture), str(row["exit_code"]))
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "MODEL_NAME": "stand-in/model",
        "VLLM_COMMAND": shlex.join(command),
        "BASE_PATH": str(tmp_path / "no-volume"),
    }
    supervisor = Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO(), timing=FAST)
    expected = State.FAILED_PERMANENT if row["permanent"] else State.FAILED_TRANSIENT
    assert settle(supervisor) is expected
    assert supervisor.wait_stopped(30), stuck(supervisor)
    assert supervisor.diagnosis is not None
    assert str(supervisor.diagnosis.category) == row["category"]
