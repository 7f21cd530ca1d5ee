"""Failed starts through the real SDK job loop: permanent failures keep the worker up
and answer every job; transient ones answer one job, then the worker exits non-zero."""

from __future__ import annotations

import json
import os
import signal

from tests.support.answers import too_long_answer
from tests.support.queue_server import QueueServer
from tests.support.vllm_env import (
    ROOT,
    events,
    replay_env,
    start_worker,
    worker_env,
)

MAX_LEN_FIXTURE = ROOT / "fixtures/vllm-0.32/max-model-len-too-large.log"
CUDA_FIXTURE = (
    ROOT
    / "fixtures/corpus/cuda_fault/vllm-17344-v085-a100-qwen25vl-72b-awq-profile-illegal-memory-access.log"
)


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(60)


def test_invalid_setting_fails_permanently_before_launch(tmp_path):
    with QueueServer() as queue:
        env = worker_env(tmp_path, MODEL_NAME="/nonexistent", ENFORCE_EAGER="maybe", **queue.env())
        proc = start_worker(env, tmp_path)
        try:
            jobs = [queue.submit({"prompt": "hi"}) for _ in range(3)]
            errors = [json.loads(queue.wait_done(j, 60)["error"]) for j in jobs]
            assert proc.poll() is None  # still up
        finally:
            assert _stop(proc) == 0
    for error in errors:
        assert error["type"] == "startup_error" and error["code"] is None
        assert error["category"] == "bad_config"
        assert "ENFORCE_EAGER" in error["message"]
    assert not [e for e in events(tmp_path) if e.get("event") == "vllm.spawning"]


def test_permanent_failure_answers_every_job_and_stays_up(tmp_path):
    """vLLM's real output of a start with MAX_MODEL_LEN above the model's limit (recorded
    from vLLM 0.32 here), replayed by a stand-in through the real SDK job loop."""
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            MAX_LEN_FIXTURE,
            MAX_MODEL_LEN="8192",
            **queue.env(),
        )
        jobs = [queue.submit({"openai_route": "/v1/models"}) for _ in range(3)]
        proc = start_worker(env, tmp_path)
        try:
            errors = [json.loads(queue.wait_done(j, 240)["error"]) for j in jobs]
            assert proc.poll() is None
        finally:
            assert _stop(proc) == 0
    for error in errors:
        assert error == too_long_answer(error["message"])
        assert "MAX_MODEL_LEN to 2048 or less" in error["message"]
    failed = [e for e in events(tmp_path) if e.get("event") == "worker.failed"]
    assert len(failed) == 1 and failed[0]["category"] == "bad_config"


def test_transient_failure_answers_one_job_then_exits_nonzero(tmp_path):
    """A GPU fault cannot happen here: a stand-in replays a real CUDA failure log."""
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            CUDA_FIXTURE,
            **queue.env(),
        )
        first, second = queue.submit({"prompt": "a"}), queue.submit({"prompt": "b"})
        proc = start_worker(env, tmp_path)
        assert proc.wait(120) == 1
        answered = {j: queue.results.get(j) for j in (first, second)}
    done = [r for r in answered.values() if r is not None]
    assert len(done) == 1
    error = json.loads(done[0]["error"])
    assert error["type"] == "prestart_failed" and error["code"] is None
    assert error["category"] == "cuda_fault"
    assert any("illegal memory access" in line for line in error["tail"])


def test_transient_failure_without_jobs_exits_anyway(tmp_path):
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            CUDA_FIXTURE,
            TRANSIENT_ANSWER_TIMEOUT="2",
            **queue.env(),
        )
        proc = start_worker(env, tmp_path)
        assert proc.wait(120) == 1
