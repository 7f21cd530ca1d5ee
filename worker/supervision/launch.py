"""What vLLM is started with: its command line and its environment. Pure."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from worker.config.argv import last_value
from worker.config.owned import HIDDEN_ENV
from worker.config.settings import Settings


def vllm_argv(settings: Settings, args: Sequence[str] | None = None) -> list[str]:
    """``VLLM_COMMAND``, vLLM's arguments (``args``: as a relaunch changed them), then the
    address the worker's proxy calls."""
    return [
        *settings.vllm_command,
        *(settings.vllm_args if args is None else args),
        "--host",
        "127.0.0.1",
        "--port",
        str(settings.vllm_port),
    ]


def vllm_env(settings: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment as vLLM gets it: caches on the volume when there is one,
    offline for a baked model, without the variables that would break the proxy."""
    child = {k: v for k, v in env.items() if k not in HIDDEN_ENV}
    base = settings.base_path
    if base.is_dir() and os.access(base, os.W_OK):
        child.setdefault("HF_HOME", str(base / "huggingface-cache"))
        child.setdefault("VLLM_CACHE_ROOT", str(base / "vllm-cache"))
    if settings.offline:
        child["HF_HUB_OFFLINE"] = "1"
    child.setdefault("VLLM_NO_USAGE_STATS", "1")
    child.setdefault("PYTHONUNBUFFERED", "1")
    return child


def hub_model(settings: Settings, child_env: Mapping[str, str]) -> tuple[str, str | None] | None:
    """(repo id, revision) when vLLM will fetch the model from the hub, else None."""
    model = settings.model
    offline = settings.offline or child_env.get("HF_HUB_OFFLINE") == "1"
    if offline or not model or os.path.exists(model):
        return None
    return model, last_value(settings.vllm_args, "--revision")
