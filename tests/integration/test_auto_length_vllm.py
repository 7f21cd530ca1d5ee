"""MAX_MODEL_LEN=auto on real vLLM (CPU build): the tiny model has 2048 positions, its KV
cache gets KV_CACHE_MEMORY_BYTES=1000000 (976 tokens at 1024 bytes each, but vLLM's CPU
backend counts blocks of 128 tokens, 7 of them, and plans the length without the one it
holds back: 768). "auto" reaches ready at a length that fits, without a second start or
download, answers jobs and says the length in force (the ``worker.max_model_len`` event,
the first job's ``worker`` metadata), which is the length the estimate gave; the full
length set instead is refused as before, every job told the length that fits (the same
estimate's, so the length "auto" is served at), in units that do not round to 0.00 GiB.
One vLLM start in all."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import events, needs_vllm, start_worker, tiny_model_env

pytestmark = [needs_vllm, pytest.mark.vllm]
KV_BYTES = "1000000"
SERVED = 768  # what vLLM 0.32's CPU build serves "auto" at with KV_BYTES (both tests agree)


def _stop(proc) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(60)


def test_auto_reaches_ready_at_a_length_that_fits_and_says_it(tmp_path):
    with QueueServer() as queue:
        models = queue.submit({"openai_route": "/v1/models"})
        env = tiny_model_env(
            tmp_path, MAX_MODEL_LEN="auto", KV_CACHE_MEMORY_BYTES=KV_BYTES, **queue.env()
        )
        proc = start_worker(env, tmp_path)
        try:
            first = queue.wait_done(models, timeout=300)
            completion = queue.submit({"prompt": "Hello", "sampling_params": {"max_tokens": 2}})
            answered = queue.wait_done(completion, timeout=120)
        finally:
            assert _stop(proc) == 0
    found = events(tmp_path)
    served = first["output"][0]["data"][0]["max_model_len"]
    assert served == SERVED
    metadata = first["output"][0]["worker"]
    assert metadata["max_model_len"] == served
    assert metadata["estimate"]["max_model_len_fit"] == served  # the estimate is right
    assert metadata["relaunches"] == []
    assert "error" not in answered and answered["output"], answered
    said = [e for e in found if e["event"] == "worker.max_model_len"]
    assert [e["max_model_len"] for e in said] == [served]
    assert len([e for e in found if e["event"] == "vllm.spawning"]) == 1  # no relaunch
    assert [e for e in found if e["event"] == "preflight.estimate"]
    cold = next(e for e in found if e["event"] == "vllm.cold_start")
    assert cold["max_model_len"] == served
    print(f"auto: ready in {cold['total_s']} s at max_model_len={served}")


def test_the_full_length_set_tells_every_job_the_length_that_fits(tmp_path):
    with QueueServer() as queue:
        jobs = [queue.submit({"openai_route": "/v1/models"}) for _ in range(2)]
        env = tiny_model_env(
            tmp_path, MAX_MODEL_LEN="2048", KV_CACHE_MEMORY_BYTES=KV_BYTES, **queue.env()
        )
        proc = start_worker(env, tmp_path)
        try:
            errors = [json.loads(queue.wait_done(j, 120)["error"]) for j in jobs]
        finally:
            assert _stop(proc) == 0
    stated = next(e for e in events(tmp_path) if e["event"] == "preflight.estimate")
    # the length "auto" is served at (the test above: the same estimate); 768 is also what
    # vLLM itself estimates (fixtures/vllm-0.32/kv-cache-below-max-len.log)
    fits = stated["max_model_len_fit"]
    assert fits == SERVED
    for error in errors:
        assert error["rule"] == "kv-cache-too-small-for-max-len"
        assert f"Set MAX_MODEL_LEN to {fits} or less" in error["message"]
        assert "0.00 GiB of KV cache" not in error["message"]
        assert "MiB" in error["message"]
