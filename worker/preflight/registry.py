"""The committed snapshot of the installed vLLM's model registry
(worker/preflight/vllm_models.json), written by scripts/snapshot_vllm_models.py (in the
image: from the image's own vLLM)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from worker.preflight.checks import Registry


@lru_cache(maxsize=1)
def load_registry() -> Registry:
    text = (
        resources.files("worker.preflight").joinpath("vllm_models.json").read_text(encoding="utf-8")
    )
    return Registry.from_dict(json.loads(text))
