"""``scripts/demo.py``: reading a failed start's answer as the RunPod SDK carries it.

The demo itself starts real vLLM three times (minutes); it is run by hand. What it
checks in the answers is tested here."""

from __future__ import annotations

import json

from tests.support.scripts import load_script

ERROR = {
    "message": "MAX_MODEL_LEN=8192 is longer than the model supports (2048 tokens).",
    "type": "startup_error",
    "code": None,
    "category": "bad_config",
    "rule": "max-model-len-above-model-limit",
}


def _demo():
    return load_script("demo")


def test_a_failed_start_s_answer_is_read_from_the_queue_or_the_local_api_server():
    job_error = _demo().job_error
    text = json.dumps(ERROR)
    assert job_error({"id": "j", "status": "FAILED", "error": text}) == ERROR  # RunPod's queue
    local = {"id": "j", "status": "COMPLETED", "output": [{"error": text}]}  # --rp_serve_api
    assert job_error(local) == ERROR
    others: tuple[dict | None, ...] = (
        None,
        {"status": "COMPLETED", "output": [{"choices": []}]},
        {"status": "FAILED", "error": "Traceback (most recent call last): ..."},
        {"output": []},
    )
    for not_a_failed_start in others:
        assert job_error(not_a_failed_start) is None
