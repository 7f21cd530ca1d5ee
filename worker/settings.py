"""The worker's settings: read once from the environment into one frozen ``Settings``.

Owns the worker's own variables (``ENV_DOCS`` lists them with defaults), the baked-model
manifest, and the final `vllm serve` argument list (built by ``worker.flags``). Every bad
value raises ``ConfigError`` naming the variable; nothing falls back silently.

Must not read ``os.environ`` itself or do anything at import: the composition root calls
``load_settings(os.environ)`` once and passes the result on.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from worker import flags as flagmod
from worker.errors import ConfigError

DEFAULT_MANIFEST = "/model/baked.json"
T = TypeVar("T")


class EnvDoc(NamedTuple):
    """One documented environment variable."""

    name: str
    default: str
    description: str


ENV_DOCS: list[EnvDoc] = [
    EnvDoc("MODEL_NAME", "", "Model to serve: a Hugging Face id or a local path (--model)."),
    EnvDoc("VLLM_COMMAND", "vllm serve", "Command that starts vLLM; split like a shell would."),
    EnvDoc("VLLM_PORT", "8000", "Port vLLM listens on at 127.0.0.1."),
    EnvDoc(
        "VLLM_STARTUP_TIMEOUT",
        "3600",
        "Seconds vLLM may take to become healthy, downloads included.",
    ),
    EnvDoc(
        "VLLM_STALL_TIMEOUT",
        "600",
        "Seconds of start-up without any output from vLLM before it counts as stalled.",
    ),
    EnvDoc(
        "VLLM_SHUTDOWN_GRACE",
        "10",
        "Seconds vLLM gets to exit after SIGTERM before SIGKILL.",
    ),
    EnvDoc("MAX_CONCURRENCY", "30", "Jobs one worker runs at the same time."),
    EnvDoc("REQUEST_TIMEOUT", "600", "Seconds one request to vLLM may take."),
    EnvDoc("BASE_PATH", "/runpod-volume", "Network volume mount; caches live under it."),
    EnvDoc(
        "TRANSIENT_ANSWER_TIMEOUT",
        "30",
        "Seconds a worker whose vLLM failed for a transient reason waits for a job to "
        "answer with the diagnosis before exiting.",
    ),
    EnvDoc(
        "BAKED_MODEL_MANIFEST",
        DEFAULT_MANIFEST,
        "JSON manifest of a model baked into the image; when present its local path is "
        "served instead of MODEL_NAME and the Hugging Face Hub is not contacted.",
    ),
    EnvDoc(
        "CRASH_LOOP_LIMIT",
        "3",
        "Failed-transient starts of the same configuration within CRASH_LOOP_WINDOW after "
        "which the next failure is treated as permanent (the crash-loop breaker).",
    ),
    EnvDoc("CRASH_LOOP_WINDOW", "1800", "Seconds the crash-loop breaker looks back."),
    EnvDoc(
        "CRASH_LOOP_RESET",
        "false",
        "true: forget this configuration's recorded failures at start (or delete "
        "BASE_PATH/.vllm-worker/restart-ledger.json).",
    ),
    EnvDoc(
        "RULES_PATH",
        "",
        "Rule pack folder (or file) to diagnose vLLM's output with; default: the built-in "
        "pack. A broken pack stops the worker at start (exit 3) with a one-line error.",
    ),
    EnvDoc(
        "VLLM_EXTRA_ARGS",
        "",
        "Extra `vllm serve` arguments, split like a shell would and appended last.",
    ),
    *(
        EnvDoc(alias, "", f"Alias of {flag} (old worker-vllm name).")
        for alias, flag in flagmod.ALIASES.items()
        if alias != "MODEL_NAME"
    ),
]


@dataclass(frozen=True)
class Settings:
    """Everything the worker needs from its environment, validated."""

    vllm_command: list[str]
    vllm_port: int
    startup_timeout_s: float
    stall_timeout_s: float
    max_concurrency: int
    request_timeout_s: float
    base_path: Path
    transient_answer_timeout_s: float
    shutdown_grace_s: float
    vllm_args: list[str]
    warnings: list[str]
    model: str
    served_model_name: str
    baked_model_path: Path | None = None
    offline: bool = False
    crash_loop_limit: int = 3
    crash_loop_window_s: float = 1800.0
    crash_loop_reset: bool = False


@dataclass(frozen=True)
class BakedModel:
    """The manifest an image with a baked-in model carries."""

    model_path: str
    tokenizer_path: str | None
    model_name: str


def _read(env: Mapping[str, str], var: str, default: str, parse: Callable[[str, str], T]) -> T:
    """Parse ``env[var]`` (or ``default`` when unset or empty) with ``parse(var, value)``."""
    return parse(var, env.get(var, "").strip() or default)


def _int(minimum: int, maximum: int | None = None) -> Callable[[str, str], int]:
    def parse(var: str, value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(
                var, f"expected an integer, got {flagmod.shown(var, value)}"
            ) from None
        if number < minimum or (maximum is not None and number > maximum):
            upper = f" and <= {maximum}" if maximum is not None else ""
            raise ConfigError(var, f"expected an integer >= {minimum}{upper}, got {number}")
        return number

    return parse


def _seconds(allow_zero: bool) -> Callable[[str, str], float]:
    def parse(var: str, value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise ConfigError(
                var, f"expected a number of seconds {bound}, got {flagmod.shown(var, value)}"
            )
        return number

    return parse


def _path(var: str, value: str) -> Path:
    return Path(value)


def _command(var: str, value: str) -> list[str]:
    try:
        command = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(var, f"cannot split into arguments: {exc}") from None
    if not command:
        raise ConfigError(var, "is empty")
    return command


def read_baked_model(env: Mapping[str, str]) -> BakedModel | None:
    """The baked-model manifest, or None when the image has none."""
    explicit = env.get("BAKED_MODEL_MANIFEST", "").strip()
    path = Path(explicit or DEFAULT_MANIFEST)
    if not path.exists():
        if explicit:
            raise ConfigError("BAKED_MODEL_MANIFEST", f"{path} does not exist")
        return None
    var = "BAKED_MODEL_MANIFEST"
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(var, f"cannot read {path} as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(var, f"{path} must hold a JSON object")
    model_path, model_name = data.get("model_path"), data.get("model_name")
    tokenizer_path = data.get("tokenizer_path")
    for key, value in (("model_path", model_path), ("model_name", model_name)):
        if not isinstance(value, str) or not value:
            raise ConfigError(var, f"{path}: {key} must be a non-empty string")
    if tokenizer_path is not None and (not isinstance(tokenizer_path, str) or not tokenizer_path):
        raise ConfigError(var, f"{path}: tokenizer_path must be a non-empty string or null")
    for key, value in (("model_path", model_path), ("tokenizer_path", tokenizer_path)):
        if value is not None and not Path(value).exists():
            raise ConfigError(var, f"{path}: {key} {value} does not exist in the image")
    return BakedModel(model_path, tokenizer_path, model_name)


# What a baked model replaces: the flag's env name, then the names that would set it too.
_BAKED_REPLACES = {
    "MODEL": ("MODEL", "MODEL_NAME", "REVISION", "MODEL_REVISION"),
    "TOKENIZER": ("TOKENIZER", "TOKENIZER_NAME", "TOKENIZER_REVISION"),
}


def _with_baked_model(
    env: Mapping[str, str], baked: BakedModel
) -> tuple[dict[str, str], list[str]]:
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


def _config_str(config: Mapping[str, Any] | None, *keys: str) -> str | None:
    for key in keys:
        value = (config or {}).get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value:
            return value
    return None


def load_settings(env: Mapping[str, str]) -> Settings:
    """Read and validate the worker's settings and vLLM's arguments from ``env``."""
    baked = read_baked_model(env)
    warnings: list[str] = []
    if baked is not None:
        env, warnings = _with_baked_model(env, baked)
    built = flagmod.build_args(env)
    warnings += built.warnings

    model = flagmod.model_arg(built.args) or _config_str(built.config, "model")
    if model is None:
        raise ConfigError(
            "MODEL_NAME",
            "no model to serve: set MODEL_NAME to a Hugging Face model id or a local path",
        )
    served = (
        flagmod.served_name_arg(built.args)
        or _config_str(built.config, "served-model-name", "served_model_name")
        or model
    )

    return Settings(
        vllm_command=_read(env, "VLLM_COMMAND", "vllm serve", _command),
        vllm_port=_read(env, "VLLM_PORT", "8000", _int(1, 65535)),
        startup_timeout_s=_read(env, "VLLM_STARTUP_TIMEOUT", "3600", _seconds(allow_zero=False)),
        stall_timeout_s=_read(env, "VLLM_STALL_TIMEOUT", "600", _seconds(allow_zero=False)),
        max_concurrency=_read(env, "MAX_CONCURRENCY", "30", _int(1)),
        request_timeout_s=_read(env, "REQUEST_TIMEOUT", "600", _seconds(allow_zero=False)),
        base_path=_read(env, "BASE_PATH", "/runpod-volume", _path),
        transient_answer_timeout_s=_read(
            env, "TRANSIENT_ANSWER_TIMEOUT", "30", _seconds(allow_zero=True)
        ),
        shutdown_grace_s=_read(env, "VLLM_SHUTDOWN_GRACE", "10", _seconds(allow_zero=True)),
        vllm_args=built.args,
        warnings=warnings,
        model=model,
        served_model_name=served,
        baked_model_path=Path(baked.model_path) if baked else None,
        offline=baked is not None,
        crash_loop_limit=_read(env, "CRASH_LOOP_LIMIT", "3", _int(1)),
        crash_loop_window_s=_read(env, "CRASH_LOOP_WINDOW", "1800", _seconds(allow_zero=False)),
        crash_loop_reset=_read(env, "CRASH_LOOP_RESET", "false", flagmod.parse_bool),
    )
