"""Turn environment variables into a `vllm serve` argument list.

An env var named like a flag in UPPER_SNAKE form (``MAX_MODEL_LEN=4096``) becomes that
flag (``--max-model-len 4096``), using the snapshot of vLLM's own parser
(``worker.config.snapshot``) to know each flag's kind and value type
(``worker.config.flag_values``). Also owns the old worker-vllm aliases (``MODEL_NAME``) and
hints for flags vLLM removed; the flags the worker sets itself are in
``worker.config.owned``, ``VLLM_CONFIG_FILE`` is checked by ``worker.config.config_file``
and ``VLLM_EXTRA_ARGS`` by ``worker.config.extra_args``. The worker's own variables
(``worker.config.settings.WORKER_ENV``) are passed in as ``reserved``.

Pure: the caller passes the environment in. It never reads ``os.environ``, logs or starts
anything; the only I/O is reading the packaged snapshot and the config file it is given.
Messages never contain the value of a variable whose name looks secret.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worker.config.config_file import check_config_file
from worker.config.extra_args import split_extra_args, strip_server_owned
from worker.config.flag_values import flag_tokens
from worker.config.owned import HIDDEN_ENV, SERVER_OWNED
from worker.config.parsers import is_secret, parse_bool, shown
from worker.config.snapshot import Flag, Flags, env_name, load_flags

__all__ = [
    "ALIASES",
    "HIDDEN_ENV",
    "PASSTHROUGH_ENV",
    "REMOVED_FLAGS",
    "SERVER_OWNED",
    "BuildResult",
    "Flag",
    "Flags",
    "build_args",
    "env_name",
    "is_secret",
    "load_flags",
    "model_arg",
    "parse_bool",
    "served_name_arg",
    "shown",
]

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

# Env vars old worker-vllm images accepted whose flags vLLM has since removed. Only used
# while the name is not a flag in the snapshot (tests/worker/config/test_flags.py checks that).
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


@dataclass(frozen=True)
class BuildResult:
    """The flags built from the environment, what the user should be told, and the
    parsed VLLM_CONFIG_FILE (None without one) so callers can find a model in it."""

    args: list[str]
    warnings: list[str]
    config: Mapping[str, Any] | None = None


def _candidates(
    env: Mapping[str, str], flags: Flags, reserved: frozenset[str]
) -> dict[str, list[tuple[str, str]]]:
    """Flag -> [(var, value)] from direct names (primary first), then aliases."""
    found: dict[str, list[tuple[str, str]]] = {}
    for var in sorted(env):
        flag = flags.by_env.get(var)
        if flag is None or var in reserved or var in PASSTHROUGH_ENV:
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


def build_args(
    env: Mapping[str, str],
    flags: Flags | None = None,
    *,
    reserved: frozenset[str] = frozenset(),
) -> BuildResult:
    """Build `vllm serve` flags from ``env``; raise ConfigError naming a bad variable.

    ``--model`` comes first, then the other flags sorted, then VLLM_EXTRA_ARGS. A flag
    set under several names takes the direct name, then a long alias, then the old
    worker-vllm alias, warning about the rest. Values are passed as given (outer
    whitespace trimmed; numbers checked first); a flag that takes several values splits
    a JSON list into items, keeps a JSON object whole, else splits on whitespace.
    Booleans accept true/false, 1/0, yes/no, on/off. Empty values count as unset.
    Variables in ``reserved`` (the worker's own) are never turned into flags.
    """
    flags = flags or load_flags()
    args: list[str] = []
    warnings: list[str] = []
    config: dict[str, Any] | None = None

    for var in sorted(env):
        if not env[var].strip() or var in reserved or var in flags.by_env:
            continue
        if var in REMOVED_FLAGS:
            hint = REMOVED_FLAGS[var].format(value=env[var].strip())
            warnings.append(f"{var} is not a vLLM {flags.vllm_version} flag; ignored: {hint}")

    found = _candidates(env, flags, reserved)
    for name in sorted(found, key=lambda n: (n != "--model", n)):
        (var, value), *ignored = found[name]
        for other, _ in ignored:
            warnings.append(f"{other} is ignored because {var} is also set")
        if name in SERVER_OWNED:
            warnings.append(f"{var} is ignored: {SERVER_OWNED[name]}")
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
        args += flag_tokens(var, value, flag)

    extra = env.get("VLLM_EXTRA_ARGS", "")
    if extra.strip():
        tokens, extra_warnings = strip_server_owned(split_extra_args(extra), flags)
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
