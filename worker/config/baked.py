"""The manifest of a model baked into the image (``BAKED_MODEL_MANIFEST``), and how it
changes the environment ``worker.config.flags`` builds vLLM's arguments from.

``worker.image.bake`` writes the manifest at image build time; this reads it at start. Every
bad manifest raises ``ConfigError`` naming ``BAKED_MODEL_MANIFEST``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.config.errors import ConfigError

DEFAULT_MANIFEST = "/model/baked.json"
_VAR = "BAKED_MODEL_MANIFEST"
_MAX_BYTES = 1 << 20

# What a baked model replaces: the flag's env name, then the names that would set it too.
_BAKED_REPLACES = {
    "MODEL": ("MODEL", "MODEL_NAME", "REVISION", "MODEL_REVISION"),
    "TOKENIZER": ("TOKENIZER", "TOKENIZER_NAME", "TOKENIZER_REVISION"),
}


@dataclass(frozen=True)
class BakedModel:
    """The manifest an image with a baked-in model carries."""

    model_path: str
    tokenizer_path: str | None
    model_name: str


def read_baked_model(env: Mapping[str, str]) -> BakedModel | None:
    """The baked-model manifest, or None when the image has none."""
    explicit = env.get(_VAR, "").strip()
    path = Path(explicit or DEFAULT_MANIFEST)
    if not path.exists():
        if explicit:
            raise ConfigError(_VAR, f"{path} does not exist")
        return None
    if not path.is_file():
        raise ConfigError(_VAR, f"{path} is not a regular file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            raise ConfigError(_VAR, f"{path} is larger than {_MAX_BYTES} bytes")
        data: Any = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(_VAR, f"cannot read {path} as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(_VAR, f"{path} must hold a JSON object")
    model_path, model_name = data.get("model_path"), data.get("model_name")
    tokenizer_path = data.get("tokenizer_path")
    for key, value in (("model_path", model_path), ("model_name", model_name)):
        if not isinstance(value, str) or not value:
            raise ConfigError(_VAR, f"{path}: {key} must be a non-empty string")
    assert isinstance(model_path, str) and isinstance(model_name, str)  # checked just above
    if tokenizer_path is not None and (not isinstance(tokenizer_path, str) or not tokenizer_path):
        raise ConfigError(_VAR, f"{path}: tokenizer_path must be a non-empty string or null")
    for key, value in (("model_path", model_path), ("tokenizer_path", tokenizer_path)):
        if value is not None and not Path(value).exists():
            raise ConfigError(_VAR, f"{path}: {key} {value} does not exist in the image")
    return BakedModel(model_path, tokenizer_path, model_name)


def with_baked_model(env: Mapping[str, str], baked: BakedModel) -> tuple[dict[str, str], list[str]]:
    """The environment as build_args should see it when the image has a baked model."""
    new_env = dict(env)
    warnings = []
    paths = {"MODEL": baked.model_path, "TOKENIZER": baked.tokenizer_path}
    for flag_var, path in paths.items():
        if path is None:
            continue
        for var in _BAKED_REPLACES[flag_var]:
            value = new_env.pop(var, "").strip()
            if value and value != baked.model_name:  # naming the baked model is fine
                warnings.append(f"{var} is ignored: the image has a baked model at {path}")
        new_env[flag_var] = path
    user_names = ("SERVED_MODEL_NAME", "OPENAI_SERVED_MODEL_NAME_OVERRIDE")
    if not any(new_env.get(var, "").strip() for var in user_names):
        new_env["SERVED_MODEL_NAME"] = baked.model_name
    return new_env, warnings
