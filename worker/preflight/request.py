"""What the configuration asks of vLLM, read from the final `vllm serve` arguments.

Pure: the argument list (and the YAML config file it may name, read by the caller) in,
one ``Request`` value out. argparse semantics: the last occurrence of a flag wins, and
values on the command line beat the config file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worker.config.argv import last_value
from worker.config.flag_values import human_readable_int

DEFAULT_UTILIZATION = 0.92  # vLLM 0.32's --gpu-memory-utilization default


@dataclass(frozen=True)
class Request:
    model: str
    revision: str | None = None
    max_model_len: int | None = None  # None: the model's own limit (or "auto"/-1)
    max_model_len_auto: bool = False  # "auto"/-1: the largest length that fits
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    quantization: str | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    trust_remote_code: bool = False
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    kv_cache_memory_bytes: int | None = None
    load_format: str = "auto"
    config_file: str | None = None

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


def _bool(args: Sequence[str], flag: str, config: Mapping[str, Any]) -> bool:
    seen = None
    negative = "--no-" + flag[2:]
    for token in args:
        name = token.partition("=")[0].replace("_", "-")
        if name == flag:
            seen = True
        elif name == negative:
            seen = False
    if seen is not None:
        return seen
    value = _config_value(config, flag)
    return str(value).lower() in ("true", "1", "yes", "on") if value is not None else False


def _config_value(config: Mapping[str, Any], flag: str) -> Any:
    key = flag[2:]
    for name in (key, key.replace("-", "_")):
        if name in config:
            return config[name]
    return None


def config_file_of(args: Sequence[str]) -> str | None:
    return last_value(args, "--config")


def read_request(
    args: Sequence[str], model: str, config: Mapping[str, Any] | None = None
) -> Request:
    """The ``Request`` in ``args``; ``config`` holds the YAML config file's values, if any.

    Raises ValueError for a value vLLM itself would reject (the caller then leaves the
    judgement to vLLM).
    """
    config = config or {}

    def value(flag: str) -> str | None:
        found = last_value(args, flag)
        if found is None:
            raw = _config_value(config, flag)
            found = None if raw is None else str(raw)
        return found

    max_len = value("--max-model-len")
    max_model_len = None
    auto = max_len is not None and max_len.strip().lower() in ("auto", "-1")
    if max_len is not None and not auto and max_len.strip().lower() not in ("none", ""):
        max_model_len = human_readable_int(max_len)
    kv_bytes = value("--kv-cache-memory-bytes")
    return Request(
        model=model,
        revision=value("--revision"),
        max_model_len=max_model_len,
        max_model_len_auto=auto,
        tensor_parallel_size=int(value("--tensor-parallel-size") or 1),
        pipeline_parallel_size=int(value("--pipeline-parallel-size") or 1),
        quantization=(value("--quantization") or None),
        dtype=(value("--dtype") or "auto").lower(),
        kv_cache_dtype=(value("--kv-cache-dtype") or "auto").lower(),
        trust_remote_code=_bool(args, "--trust-remote-code", config),
        gpu_memory_utilization=float(value("--gpu-memory-utilization") or DEFAULT_UTILIZATION),
        kv_cache_memory_bytes=human_readable_int(kv_bytes) if kv_bytes else None,
        load_format=(value("--load-format") or "auto").lower(),
        config_file=config_file_of(args),
    )
