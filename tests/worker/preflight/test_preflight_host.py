"""The RunPod SDK's own fitness checks run in the pre-flight, forced to fail here by
the SDK's own knobs; afterwards the SDK's start finds nothing left to run (no os._exit).

Each case runs in a fresh interpreter: the SDK reads its limits at import. The memory
check runs first and the disk check second, so a failing one ends the run before the
SDK's network check (which would contact 8.8.8.8) is reached.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support.vllm_env import run_python

SCRIPT = """
import asyncio, contextlib, json, sys
from diagnostics import load_pack
from worker.preflight import run_preflight
from worker.preflight.host import run_checks, take_sdk_checks
from runpod.serverless.modules import rp_fitness
with contextlib.redirect_stdout(sys.stderr):
    from types import SimpleNamespace
    settings = SimpleNamespace(model="/nonexistent", vllm_args=[], baked_model_path=None)
    result = run_preflight(settings, {}, pack=load_pack(), sdk_checks=True)
    left = len(rp_fitness._fitness_checks)
    asyncio.run(rp_fitness.run_fitness_checks())  # the SDK's start: would os._exit(1)
d = result.diagnosis
print(json.dumps({"diagnosis": d.to_dict() if d else None, "left": left,
                  "findings": [f.to_dict() for f in result.findings]}))
"""


def run(**knobs: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
    env.update(RUNPOD_SKIP_GPU_CHECK="true", **knobs)
    done = run_python(["-c", SCRIPT], env, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("knobs", "check", "words"),
    [
        ({"RUNPOD_MIN_MEMORY_GB": "100000"}, "memory_check", "Insufficient memory"),
        (
            {"RUNPOD_MIN_MEMORY_GB": "0", "RUNPOD_MIN_DISK_PERCENT": "101"},
            "disk_check",
            "Insufficient disk space",
        ),
    ],
)
def test_a_failing_sdk_check_is_a_transient_host_diagnosis(knobs, check, words):
    out = run(**knobs)
    d = out["diagnosis"]
    assert d["state"] == "failed-transient" and d["rule"] == "host-fitness-check"
    assert d["category"] == "other" and d["permanent"] is False
    assert check in d["cause"] and words in d["cause"] and "before launch" in d["cause"]
    assert out["findings"] == [
        {
            "step": "host",
            "outcome": "failed",
            "detail": out["findings"][0]["detail"],
            "ms": out["findings"][0]["ms"],
        }
    ]
    assert out["left"] == 0  # the SDK's own start runs none of them again


def test_skipped_sdk_checks_let_the_preflight_go_on():
    out = run(RUNPOD_SKIP_AUTO_SYSTEM_CHECKS="true")
    assert out["findings"][0] == {
        "step": "host",
        "outcome": "ok",
        "detail": "passed: none registered",
        "ms": out["findings"][0]["ms"],
    }
    assert out["left"] == 0


def test_a_synchronous_check_that_never_returns_is_not_waited_for():
    # Before: asyncio.to_thread's executor was joined when the loop ended, so the
    # timeout did not bound a synchronous check: run_checks waited for it to return.
    import threading
    import time

    from worker.preflight.host import run_checks

    release = threading.Event()

    def gpu_test() -> None:  # blocked in the driver
        release.wait(30)

    async def memory_check() -> None:
        raise RuntimeError("Insufficient memory: 1 GB available")

    began = time.monotonic()
    try:
        report = run_checks([gpu_test, memory_check], 0.3)
    finally:
        release.set()
    assert time.monotonic() - began < 2
    assert report.timed_out == ["gpu_test"]
    assert report.failure is not None and report.failure.check == "memory_check"
    assert "Insufficient memory" in report.failure.error
