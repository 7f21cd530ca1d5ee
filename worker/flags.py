"""Turn environment variables into a `vllm serve` argument list.

Owns the mapping from environment to flags: an env var named like a flag in UPPER_SNAKE
form (``MAX_MODEL_LEN=4096``) becomes that flag (``--max-model-len 4096``), using the
snapshot of vLLM's own parser in ``vllm_flags.json`` (written by
``scripts/snapshot_vllm_flags.py``) to know each flag's kind and value type. Also owns the
old worker-vllm aliases (``MODEL_NAME``), the names reserved for the worker itself, the
flags the worker sets itself (``--host``, ``--port``, ...), hints for flags vLLM removed,
the ``VLLM_CONFIG_FILE`` check and ``VLLM_EXTRA_ARGS``.

Pure: the caller passes the environment in. It never reads ``os.environ``, logs or starts
anything; the only I/O is reading the packaged snapshot and the config file it is given.
Messages never contain the value of a variable whose name looks secret.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from worker.errors import ConfigError

# Env vars the worker reads itself (worker.settings): never turned into flags, even if
# vLLM one day grows a flag of the same name. tests/worker/test_settings.py checks that every
# variable settings reads is listed here.
WORKER_ENV = frozenset(
    {
        "VLLM_COMMAND",
        "VLLM_PORT",
        "VLLM_STARTUP_TIMEOUT",
        "VLLM_STALL_TIMEOUT",
        "VLLM_SHUTDOWN_GRACE",
        "MAX_CONCURRENCY",
        "REQUEST_TIMEOUT",
        "BASE_PATH",
        "TRANSIENT_ANSWER_TIMEOUT",
        "BAKED_MODEL_MANIFEST",
        "VLLM_EXTRA_ARGS",
        "CRASH_LOOP_LIMIT",
        "CRASH_LOOP_WINDOW",
        "CRASH_LOOP_RESET",
        "RULES_PATH",
    }
)

# Names kept from the old worker-vllm; the direct form (MODEL) wins over the alias.
# (TOKENIZER_REVISION needs no alias: it is the direct form of --tokenizer-revision.)
ALIASES: Mapping[str, str] = {
    "MODEL_NAME": "--model",
    "MODEL_REVISION": "--revision",
    "TOKENIZER_NAME": "--tokenizer",
    "OPENAI_SERVED_MODEL_NAME_OVERRIDE": "--served-model-name",
    "CUSTOM_CHAT_TEMPLATE": "--chat-template",
    "VLLM_CONFIG_FILE": "--config",
}

# Flags that are also read from the environment by vLLM or huggingface_hub themselves:
# left in the environment, never copied onto a command line (a token in argv leaks).
PASSTHROUGH_ENV = frozenset({"HF_TOKEN"})

# Flags the worker owns: its proxy talks plain HTTP to vLLM's OpenAI server on
# 127.0.0.1:VLLM_PORT, so anything that moves, secures or replaces that server breaks it.
_SERVER_OWNED: Mapping[str, str] = {
    "--host": "the worker sets --host 127.0.0.1 itself",
    "--port": "the worker sets --port from VLLM_PORT itself",
    "--uds": "the worker talks to vLLM over TCP",
    "--api-key": "only the worker's proxy talks to vLLM; RunPod authenticates requests",
    "--ssl-keyfile": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-certfile": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-ca-certs": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-cert-reqs": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--ssl-ciphers": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--enable-ssl-refresh": "the worker talks plain HTTP to vLLM on 127.0.0.1",
    "--root-path": "the worker's proxy calls vLLM's routes at /",
    "--headless": "the worker needs vLLM's OpenAI HTTP server",
    "--grpc": "the worker needs vLLM's OpenAI HTTP server",
    "--tokens-only": "the worker needs vLLM's OpenAI HTTP server",
}
# --host and --port are overridden on the command line, so a config file may keep them.
_CLI_OVERRIDES = frozenset({"--host", "--port"})

# Env vars old worker-vllm images accepted whose flags vLLM has since removed. Only used
# while the name is not a flag in the snapshot (tests/worker/test_flags.py checks that).
REMOVED_FLAGS: Mapping[str, str] = {
    "DISABLE_LOG_REQUESTS": "requests are not logged by default now; "
    "set ENABLE_LOG_REQUESTS=true to log them",
    "USE_V2_BLOCK_MANAGER": "no replacement; remove it",
    "NUM_LOOKAHEAD_SLOTS": "no replacement; remove it",
    "SWAP_SPACE": "no replacement; remove it (preempted requests are recomputed, "
    "not swapped; for CPU KV-cache offloading see KV_OFFLOADING_SIZE)",
    "PREEMPTION_MODE": "no replacement; remove it (preemption is always by recomputation)",
    "ENGINE_USE_RAY": "no replacement; remove it",
    "WORKER_USE_RAY": "use DISTRIBUTED_EXECUTOR_BACKEND=ray",
    "TOKENIZER_POOL_SIZE": "no replacement; remove it (RENDERER_NUM_WORKERS sets the "
    "API server's tokenization threads)",
    "TOKENIZER_POOL_TYPE": "no replacement; remove it",
    "TOKENIZER_POOL_EXTRA_CONFIG": "no replacement; remove it",
    "GUIDED_DECODING_BACKEND": 'use STRUCTURED_OUTPUTS_CONFIG=\'{{"backend": "{value}"}}\'',
    "MAX_SEQ_LEN_TO_CAPTURE": "use MAX_CUDAGRAPH_CAPTURE_SIZE (CUDA graphs are captured "
    "per batch size now)",
    "SCHEDULER_DELAY_FACTOR": "no replacement; remove it",
    "QUANTIZATION_PARAM_PATH": "no replacement; remove it",
    "ROPE_SCALING": "use HF_OVERRIDES='{{\"rope_parameters\": {{...}}}}'",
    "ROPE_THETA": 'use HF_OVERRIDES=\'{{"rope_parameters": {{"rope_theta": ...}}}}\'',
    "LORA_EXTRA_VOCAB_SIZE": "no replacement; remove it",
    "LONG_LORA_SCALING_FACTORS": "no replacement; remove it",
    "SPECULATIVE_MODEL": "use SPEC_MODEL (or SPECULATIVE_CONFIG='{{\"model\": ...}}')",
    "NUM_SPECULATIVE_TOKENS": "use SPEC_TOKENS (or SPECULATIVE_CONFIG)",
    "ENABLE_REASONING": "no replacement needed; REASONING_PARSER alone enables reasoning",
}

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_BOOL_HINT = "true/false, 1/0, yes/no or on/off"
_SECRET = re.compile("TOKEN|KEY|SECRET|PASSWORD")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Flag:
    """One option of `vllm serve`, as recorded in the snapshot."""

    name: str
    dest: str
    kind: str  # value | bool_pair | store_true | store_false | append
    type: str | None = None
    optional: bool = False
    nargs: str | int | None = None
    multiple: bool = False
    negative: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: str | None = None

    @property
    def env_names(self) -> tuple[str, ...]:
        """UPPER_SNAKE forms of the flag and its long aliases, primary first."""
        longs = [self.name, *(a for a in self.aliases if a.startswith("--"))]
        return tuple(env_name(f) for f in longs)

    @property
    def takes_value(self) -> bool:
        """Whether the flag is followed by a value on the command line."""
        return self.kind in ("value", "append")


@dataclass(frozen=True)
class Flags:
    """The options of one vLLM version, looked up by flag, option string or env name."""

    vllm_version: str
    by_flag: Mapping[str, Flag]
    by_option: Mapping[str, Flag] = field(repr=False)
    by_env: Mapping[str, Flag] = field(repr=False)

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> Flags:
        by_flag = {
            name: Flag(name=name, **{**info, "aliases": tuple(info.get("aliases", ()))})
            for name, info in data["flags"].items()
        }
        by_option: dict[str, Flag] = {}
        by_env: dict[str, Flag] = {}
        for flag in by_flag.values():
            for option in (flag.name, flag.negative, *flag.aliases):
                if option:
                    by_option[option] = flag
            for name in flag.env_names:
                by_env.setdefault(name, flag)
        return cls(data["vllm_version"], by_flag, by_option, by_env)


@dataclass(frozen=True)
class BuildResult:
    """The flags built from the environment, what the user should be told, and the
    parsed VLLM_CONFIG_FILE (None without one) so callers can find a model in it."""

    args: list[str]
    warnings: list[str]
    config: Mapping[str, Any] | None = None


def env_name(flag: str) -> str:
    """``--max-model-len`` -> ``MAX_MODEL_LEN``."""
    return flag.lstrip("-").upper().replace("-", "_")


def is_secret(name: str) -> bool:
    """Whether values of this variable must never be shown."""
    return bool(_SECRET.search(name.upper()))


def shown(name: str, value: str) -> str:
    """The value as it may appear in a message about variable ``name``."""
    return "<redacted>" if is_secret(name) else repr(value)


@functools.cache
def load_flags() -> Flags:
    """The snapshot packaged next to this module."""
    text = resources.files("worker").joinpath("vllm_flags.json").read_text(encoding="utf-8")
    return Flags.from_snapshot(json.loads(text))


def parse_bool(var: str, value: str) -> bool:
    """Parse a boolean env value, or raise ConfigError naming ``var``."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(var, f"expected {_BOOL_HINT}, got {shown(var, value)}")


def _check_number(var: str, value: str, flag: Flag) -> None:
    """Reject values vLLM's argparse type for ``flag`` would reject (numbers, JSON)."""
    if flag.optional and value in ("None", ""):
        return
    try:
        if flag.type == "int":
            int(value)
        elif flag.type == "float":
            float(value)
        elif flag.type == "human_readable_int":
            _human_readable_int(value)
        elif flag.type == "human_readable_int_or_auto":
            if value.strip().lower() not in ("auto", "-1"):
                _human_readable_int(value)
        elif flag.type == "loads":
            json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(var, f"expected JSON for {flag.name} ({exc.msg})") from None
    except ValueError:
        expected = {
            "int": "an integer",
            "float": "a number such as 0.9",
            "human_readable_int": "an integer such as 8192, 32k or 1M",
            "human_readable_int_or_auto": "an integer such as 8192, 32k or 1M, or auto",
        }.get(flag.type or "", f"a valid {flag.type}")
        raise ConfigError(var, f"expected {expected}, got {shown(var, value)}") from None


def _human_readable_int(value: str) -> int:
    """vllm.utils.argparse_utils.human_readable_int: 1k=1000, 1K=1024, 25.6k=25600."""
    match = _HUMAN_INT.fullmatch(value.strip())
    if not match:
        return int(value)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    return int(number) * _BINARY[suffix]  # ValueError for "1.5K", as in vLLM


def _split_values(value: str) -> list[str]:
    """Values for a flag that takes several: a JSON list, one JSON object, or words."""
    if value.startswith("["):
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [i if isinstance(i, str) else json.dumps(i) for i in items]
    if value.startswith("{"):
        return [value]
    return value.split()


def _flag_tokens(var: str, value: str, flag: Flag) -> list[str]:
    if flag.kind == "bool_pair":
        return [flag.name if parse_bool(var, value) else str(flag.negative)]
    if flag.kind in ("store_true", "store_false"):
        return [flag.name] if parse_bool(var, value) else []
    if not flag.multiple:
        _check_number(var, value, flag)
        return [flag.name, value]
    items = _split_values(value)
    for item in items:
        _check_number(var, item, flag)
    if flag.kind == "append":
        return [token for item in items for token in (flag.name, item)]
    return [flag.name, *items]


def check_config_file(var: str, path: str, flags: Flags) -> tuple[dict[str, Any], list[str]]:
    """Read the YAML file vLLM will read for --config; return its mapping and warnings."""
    if Path(path).suffix not in (".yaml", ".yml"):
        raise ConfigError(var, f"{path} must end in .yaml or .yml (vLLM rejects other files)")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(var, f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Not str(exc): it quotes the offending line, which may hold a token.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(var, f"{path} is not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(var, f"{path} must be a YAML mapping of flag names to values")
    warnings = []
    for key, value in data.items():
        option = "--" + str(key).replace("_", "-")
        flag = flags.by_option.get(option)
        if option in _SERVER_OWNED and option not in _CLI_OVERRIDES:
            raise ConfigError(var, f"{path} sets {key!r}: {_SERVER_OWNED[option]}; remove it")
        if flag is None:
            warnings.append(f"{var}: {key!r} in {path} is not a vLLM {flags.vllm_version} flag")
        elif value is False and "_" in str(key) and flag.kind == "bool_pair":
            # vLLM looks up "--no-<key>" without normalising underscores and drops it.
            hyphenated = str(key).replace("_", "-")
            warnings.append(
                f"{var}: vLLM ignores '{key}: false' in {path}; write '{hyphenated}: false'"
            )
    return data, warnings


def _strip_server_owned(tokens: list[str], flags: Flags) -> tuple[list[str], list[str]]:
    """Drop flags the worker owns (and their values) from VLLM_EXTRA_ARGS."""
    kept: list[str] = []
    warnings: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, has_inline_value, _ = token.partition("=")
        option = name.replace("_", "-") if name.startswith("--") else name
        flag = flags.by_option.get(option)
        owner = flag.name if flag else option
        i += 1
        if owner not in _SERVER_OWNED:
            kept.append(token)
            continue
        warnings.append(f"VLLM_EXTRA_ARGS: {option} was removed: {_SERVER_OWNED[owner]}")
        if flag is not None and flag.takes_value and not has_inline_value:
            while i < len(tokens) and not tokens[i].startswith("-"):
                i += 1
                if flag.nargs not in ("+", "*"):
                    break
    return kept, warnings


def _candidates(env: Mapping[str, str], flags: Flags) -> dict[str, list[tuple[str, str]]]:
    """Flag -> [(var, value)] from direct names (primary first), then aliases."""
    found: dict[str, list[tuple[str, str]]] = {}
    for var in sorted(env):
        flag = flags.by_env.get(var)
        if flag is None or var in WORKER_ENV or var in PASSTHROUGH_ENV:
            continue
        if env[var].strip():
            found.setdefault(flag.name, []).append((var, env[var].strip()))
    for name, flag_list in found.items():
        order = flags.by_flag[name].env_names
        flag_list.sort(key=lambda item: order.index(item[0]))
    for alias, flag_name in ALIASES.items():
        if env.get(alias, "").strip():
            found.setdefault(flag_name, []).append((alias, env[alias].strip()))
    return found


def build_args(env: Mapping[str, str], flags: Flags | None = None) -> BuildResult:
    """Build `vllm serve` flags from ``env``; raise ConfigError naming a bad variable.

    ``--model`` comes first, then the other flags sorted, then VLLM_EXTRA_ARGS. A flag
    set under several names takes the direct name, then a long alias, then the old
    worker-vllm alias, warning about the rest. Values are passed as given (outer
    whitespace trimmed; numbers checked first); a flag that takes several values splits
    a JSON list into items, keeps a JSON object whole, else splits on whitespace.
    Booleans accept true/false, 1/0, yes/no, on/off. Empty values count as unset.
    """
    flags = flags or load_flags()
    args: list[str] = []
    warnings: list[str] = []
    config: dict[str, Any] | None = None

    for var in sorted(env):
        if not env[var].strip() or var in WORKER_ENV or var in flags.by_env:
            continue
        if var in REMOVED_FLAGS:
            hint = REMOVED_FLAGS[var].format(value=env[var].strip())
            warnings.append(f"{var} is not a vLLM {flags.vllm_version} flag; ignored: {hint}")

    found = _candidates(env, flags)
    for name in sorted(found, key=lambda n: (n != "--model", n)):
        (var, value), *ignored = found[name]
        for other, _ in ignored:
            warnings.append(f"{other} is ignored because {var} is also set")
        if name in _SERVER_OWNED:
            warnings.append(f"{var} is ignored: {_SERVER_OWNED[name]}")
            continue
        flag = flags.by_flag.get(name)
        if flag is None:  # an alias whose flag this vLLM lacks
            warnings.append(f"{var} is ignored: vLLM {flags.vllm_version} has no {name}")
            continue
        if flag.deprecated:
            warnings.append(f"{var}: {flag.deprecated}")
        if name == "--config":
            config, config_warnings = check_config_file(var, value, flags)
            warnings += config_warnings
        args += _flag_tokens(var, value, flag)

    extra = env.get("VLLM_EXTRA_ARGS", "")
    if extra.strip():
        try:
            tokens = shlex.split(extra)
        except ValueError as exc:
            raise ConfigError("VLLM_EXTRA_ARGS", f"cannot split into arguments: {exc}") from None
        tokens, extra_warnings = _strip_server_owned(tokens, flags)
        warnings += extra_warnings
        if model_arg(args) and model_arg(tokens):
            warnings.append("VLLM_EXTRA_ARGS: --model is given twice; vLLM serves the first one")
        args += tokens
    return BuildResult(args=args, warnings=warnings, config=config)


def _values_of(args: Sequence[str], flag: str) -> Iterable[str]:
    """The first value after each occurrence of ``flag`` (``--f v`` or ``--f=v``)."""
    for i, token in enumerate(args):
        name, has_inline_value, inline = token.partition("=")
        if not name.startswith("--") or name.replace("_", "-") != flag:
            continue
        if has_inline_value:
            yield inline
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield args[i + 1]


def model_arg(args: Sequence[str]) -> str | None:
    """The model given with --model; vLLM serves the first one when given twice."""
    return next(iter(_values_of(args, "--model")), None)


def served_name_arg(args: Sequence[str]) -> str | None:
    """The first --served-model-name value of the last occurrence (argparse: last wins)."""
    values = list(_values_of(args, "--served-model-name"))
    return values[-1] if values else None
