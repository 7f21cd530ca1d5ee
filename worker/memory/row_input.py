"""One run to estimate, read and checked from a mapping in the fit-truth table's own field
names (a row without its observed numbers, the model's config facts under ``config``).

``parse_row(row)`` returns a ``RunSpec`` or raises ``InputError`` with one line saying
what is wrong: a missing ``config``, a string or a boolean where a number belongs, NaN,
infinity, a negative or zero count. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worker.memory.vllm_defaults import (
    GIB,
    LATEST,
    LATEST_V0,
    Version,
    parse_version,
    resolve_engine,
)

_DTYPE_BYTES = {
    "auto": 2, "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "float32": 4, "float": 4, "fp32": 4,
}  # fmt: skip
_CONFIG_COUNTS = (
    "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
    "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
    "sliding_window", "num_experts", "moe_intermediate_size", "num_experts_per_tok",
    "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
)  # fmt: skip


MAX_COUNT = 2**40  # larger counts are not a model's or a GPU's
MAX_BYTES = 2**50
MAX_LAYERS = 100_000
MAX_DEVICES = 4096


class InputError(ValueError):
    """The input cannot be estimated; the message is one line."""


def _where(key: str) -> str:
    return f"field {key!r}"


def number(
    obj: Mapping[str, Any], key: str, *, integer: bool = False, positive: bool = False,
    label: str | None = None, maximum: float = MAX_COUNT,
) -> float | None:  # fmt: skip
    """A finite, non-negative number (or None when absent or null)."""
    value = obj.get(key)
    name = _where(label or key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name} must be a number, not {type(value).__name__} {value!r}")
    if isinstance(value, int) and abs(value) > maximum:
        raise InputError(f"{name} is too large: {value}")
    if not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise InputError(f"{name} must be {'positive' if positive else 'non-negative'}: {value!r}")
    if integer and not float(value).is_integer():
        raise InputError(f"{name} must be a whole number: {value!r}")
    if value > maximum:
        raise InputError(f"{name} is too large: {value!r}")
    return int(value) if integer else float(value)


def _int(
    obj: Mapping[str, Any], key: str, label: str | None = None, maximum: float = MAX_COUNT
) -> int | None:
    value = number(obj, key, integer=True, positive=True, label=label, maximum=maximum)
    return None if value is None else int(value)


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"{_where(key)} must be a string, not {type(value).__name__} {value!r}")


def _flag(obj: Mapping[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise InputError(f"{_where(key)} must be true or false, not {value!r}")


def dtype_bytes(name: str | None, key: str) -> int:
    if name is None:
        return 2
    clean = name.lower().removeprefix("torch.")
    if clean in _DTYPE_BYTES:
        return _DTYPE_BYTES[clean]
    raise InputError(f"{_where(key)}: unknown dtype {name!r}")


def cache_bytes(name: str | None, model_bytes: int) -> float:
    if name is None or name == "auto":
        return model_bytes
    clean = name.lower()
    if clean.startswith("fp8") or clean in ("int8", "uint8"):
        return 1
    if clean in _DTYPE_BYTES:
        return _DTYPE_BYTES[clean]
    raise InputError(f"field 'kv_cache_dtype': unknown cache dtype {name!r}")


@dataclass(frozen=True)
class RunSpec:
    config: Mapping[str, Any]
    engine: str
    version: Version
    version_given: bool
    tp: int
    pp: int
    max_model_len: int | None
    util: float
    dtype_bytes: int
    kv_cache_dtype: str
    cache_bytes: float
    block_size: int | None
    enforce_eager: bool
    quantization: str | None
    gpu_total: float | None  # bytes per device
    gpu_name: str
    kv_cache_memory: float | None  # bytes, as --kv-cache-memory-bytes sets it
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    chunked_prefill: bool | None
    llm_class: bool
    lora: bool
    multimodal: bool
    pooling: bool
    safetensors_parameters: Mapping[str, int] | None
    weights_file_bytes: int | None
    platform: str = "gpu"  # "cpu": vLLM's CPU build (its block size differs)


def _check_config(config: Mapping[str, Any]) -> None:
    for key in _CONFIG_COUNTS:
        limit = MAX_LAYERS if key == "num_hidden_layers" else MAX_COUNT
        number(config, key, label=f"config.{key}", maximum=limit)
    if not isinstance(config.get("quantization_config") or {}, Mapping):
        raise InputError("field 'config.quantization_config' must be an object or null")


def _parameters(row: Mapping[str, Any]) -> Mapping[str, int] | None:
    params = row.get("safetensors_parameters")
    if params is None:
        return None
    if not isinstance(params, Mapping):
        raise InputError("field 'safetensors_parameters' must be an object of dtype: count")
    label = "safetensors_parameters.{}"
    return {
        str(k): int(number(params, k, integer=True, label=label.format(k)) or 0) for k in params
    }


def parse_row(row: object) -> RunSpec:
    if not isinstance(row, Mapping):
        raise InputError(f"the input must be a JSON object, not {type(row).__name__}")
    config = row.get("config")
    if not isinstance(config, Mapping):
        raise InputError("missing field 'config' (the model's config facts, an object)")
    _check_config(config)
    gpu = row.get("gpu") or {}
    flags = row.get("flags") or {}
    if not isinstance(gpu, Mapping) or not isinstance(flags, Mapping):
        raise InputError("fields 'gpu' and 'flags' must be objects when given")
    total = number(
        gpu, "total_memory_gib_printed", positive=True, label="gpu.total_memory_gib_printed"
    )
    version_text = _text(row, "vllm_version")
    version = parse_version(version_text)
    util = number(row, "gpu_memory_utilization", positive=True)
    if util is not None and util > 1:
        raise InputError(f"field 'gpu_memory_utilization' must be at most 1: {util!r}")
    model_bytes = dtype_bytes(_text(row, "dtype"), "dtype")
    kv_dtype = _text(row, "kv_cache_dtype") or "auto"
    seqs = _int(row, "max_num_seqs") or _int(flags, "max_num_seqs", "flags.max_num_seqs")
    memory = number(row, "kv_cache_memory_bytes", maximum=MAX_BYTES)
    files = _int(row, "weights_file_bytes", maximum=MAX_BYTES)
    usage = _text(row, "usage_context") or "api_server"
    arch_names = config.get("architectures")
    name = arch_names[0] if isinstance(arch_names, list) and arch_names else ""
    eager = _flag(row, "enforce_eager")
    engine_text = _text(row, "engine")
    engine = resolve_engine(engine_text, version)
    cpu = "cpu" in ((engine_text or "").lower(), (_text(row, "platform") or "").lower())
    return RunSpec(
        config=config,
        engine=engine,
        version=version or (LATEST_V0 if engine == "V0" else LATEST),
        version_given=version is not None,
        tp=_int(row, "tensor_parallel_size", maximum=MAX_DEVICES) or 1,
        pp=_int(row, "pipeline_parallel_size", maximum=MAX_DEVICES) or 1,
        max_model_len=_int(row, "max_model_len"),
        util=util if util is not None else 0.9,
        dtype_bytes=model_bytes,
        kv_cache_dtype=kv_dtype,
        cache_bytes=cache_bytes(kv_dtype, model_bytes),
        block_size=_int(row, "block_size"),
        enforce_eager=bool(eager if eager is not None else flags.get("enforce_eager") is True),
        quantization=_text(row, "quantization"),
        gpu_total=None if total is None else total * GIB,
        gpu_name=str(gpu.get("name") or ""),
        kv_cache_memory=memory,
        max_num_seqs=seqs,
        max_num_batched_tokens=_int(row, "max_num_batched_tokens"),
        chunked_prefill=_flag(row, "enable_chunked_prefill"),
        llm_class=usage.lower() in ("llm", "llm_class"),
        lora=flags.get("lora") is True or _flag(row, "enable_lora") is True,
        multimodal=flags.get("multimodal") is True or "ForConditionalGeneration" in str(name),
        pooling=flags.get("pooling_model") is True,
        safetensors_parameters=_parameters(row),
        weights_file_bytes=files,
        platform="cpu" if cpu else "gpu",
    )
