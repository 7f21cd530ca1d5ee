"""The job answers more than one test expects, written once."""

from __future__ import annotations


def too_long_answer(message: str) -> dict:
    """The error of a start with MAX_MODEL_LEN above the model's limit (recorded vLLM 0.32
    log), as queue jobs and load-balancer requests both get it; ``message`` is the
    answer's own, checked apart."""
    return {
        "message": message,
        "type": "startup_error",
        "code": None,
        "category": "bad_config",
        "rule": "max-model-len-above-model-limit",
    }
