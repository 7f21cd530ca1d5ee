"""When a configuration does not fit, what would: the largest MAX_MODEL_LEN on this GPU,
the smallest TENSOR_PARALLEL_SIZE that holds the configured length, what
KV_CACHE_DTYPE=fp8 gives, and which RunPod Serverless GPU sizes would fit.

``suggest(spec)`` returns ``Suggestions``; ``render(s)`` says them in one or two plain
sentences, ``options_sentence(s)`` only what would fit (the sentence the pre-flight and
the answer to a failed start add). Every figure is the memory model's, re-run with the
one setting changed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from worker.memory.memory_model import MemoryEstimate, estimate_memory
from worker.memory.row_input import RunSpec
from worker.memory.vllm_defaults import GIB

MIB = 1024**2
MAX_TP = 8  # GPUs one RunPod Serverless worker can have
# RunPod Serverless GPU categories (nominal memory, a device of the category whose name
# decides vLLM's batch defaults). source: runpod.io serverless pricing page, as of 2026-12
RUNPOD_GPUS: tuple[tuple[str, int, str], ...] = (
    ("16 GB", 16, "NVIDIA RTX A4000"),
    ("24 GB", 24, "NVIDIA RTX A5000"),
    ("24 GB PRO", 24, "NVIDIA GeForce RTX 4090"),
    ("32 GB PRO (5090)", 32, "NVIDIA GeForce RTX 5090"),
    ("48 GB", 48, "NVIDIA RTX A6000"),
    ("48 GB PRO", 48, "NVIDIA L40S"),
    ("80 GB", 80, "NVIDIA A100 80GB PCIe"),
    ("80 GB PRO (H100)", 80, "NVIDIA H100 80GB HBM3"),
    ("141 GB (H200)", 141, "NVIDIA H200"),
    ("180 GB (B200)", 180, "NVIDIA B200"),
)
# torch reports about 98.5 % of the nominal size as a GPU's total (the calibration rows:
# 79.25 GiB on an 80 GB A100, 39.38 on a 40 GB A100, 23.58 on a 24 GB RTX 3090)
VISIBLE_SHARE = 0.985


@dataclass(frozen=True)
class Suggestions:
    fits: bool | None
    max_model_len: int
    kv_memory: float | None  # bytes per device now
    kv_tokens: int | None
    largest_max_model_len: int | None  # on this GPU, other settings unchanged
    smallest_tensor_parallel_size: int | None  # holds the configured length
    fp8_kv_tokens: int | None
    fp8_max_model_len: int | None
    gpu_sizes_that_fit: tuple[str, ...]
    tp_kv_tokens: int | None = None  # the KV cache at the smallest TENSOR_PARALLEL_SIZE
    tp_fp8_kv_tokens: int | None = None  # the same with KV_CACHE_DTYPE=fp8 too
    platform: str = "gpu"


def _fits(spec: RunSpec) -> bool:
    return estimate_memory(spec).fits is True


def largest_max_model_len(spec: RunSpec, upper: int) -> int | None:
    """The largest MAX_MODEL_LEN in [1, upper] that fits (the profile's batch follows
    the length in V0, so every candidate is re-estimated); None: not even 1 token."""
    if not _fits(replace(spec, max_model_len=1)):
        return None
    low, high = 1, upper + 1  # low fits, high does not (or is past the bound)
    while high - low > 1:
        mid = (low + high) // 2
        if _fits(replace(spec, max_model_len=mid)):
            low = mid
        else:
            high = mid
    return low


def smallest_tensor_parallel(spec: RunSpec, heads: int | None) -> int | None:
    tp = 1
    while tp <= MAX_TP:
        if (heads is None or heads % tp == 0) and _fits(replace(spec, tp=tp)):
            return tp
        tp *= 2
    return None


def gpu_sizes(spec: RunSpec) -> tuple[str, ...]:
    fitting = []
    for label, nominal, name in RUNPOD_GPUS:
        other = replace(spec, gpu_total=nominal * VISIBLE_SHARE * GIB, gpu_name=name,
                        kv_cache_memory=None)  # fmt: skip
        if _fits(other):
            fitting.append(label)
    return tuple(fitting)


def suggest(
    spec: RunSpec, est: MemoryEstimate | None = None, heads: int | None = None
) -> Suggestions:
    est = est or estimate_memory(spec)
    fp8: MemoryEstimate | None = None
    if spec.cache_bytes > 1:
        fp8 = estimate_memory(replace(spec, kv_cache_dtype="fp8", cache_bytes=1))
    upper = max(est.max_model_len - 1, 1) if est.fits is False else est.max_model_len
    tp = smallest_tensor_parallel(spec, heads)
    at_tp = tp_fp8 = None
    if tp is not None and tp != spec.tp:
        at_tp = estimate_memory(replace(spec, tp=tp))
        if fp8 is not None:
            tp_fp8 = estimate_memory(replace(spec, tp=tp, kv_cache_dtype="fp8", cache_bytes=1))
    return Suggestions(
        fits=est.fits,
        max_model_len=est.max_model_len,
        kv_memory=est.kv_memory,
        kv_tokens=est.tokens,
        largest_max_model_len=largest_max_model_len(spec, upper),
        smallest_tensor_parallel_size=tp,
        fp8_kv_tokens=fp8.tokens if fp8 else None,
        fp8_max_model_len=fp8.max_len_fit if fp8 else None,
        gpu_sizes_that_fit=gpu_sizes(spec) if spec.platform == "gpu" else (),
        tp_kv_tokens=at_tp.tokens if at_tp else None,
        tp_fp8_kv_tokens=tp_fp8.tokens if tp_fp8 else None,
        platform=spec.platform,
    )


def size_text(value: float) -> str:
    """GiB with two decimals, or MiB when GiB would round to 0.00."""
    if round(abs(value) / GIB, 2) == 0:
        return f"{value / MIB:.2f} MiB"
    return f"{value / GIB:.2f} GiB"


def _listed(items: list[str], last: str = " or ") -> str:
    return ", ".join(items[:-1]) + last + items[-1] if len(items) > 1 else items[0]


def _options(s: Mapping[str, Any], with_length: bool) -> list[str]:
    options = []
    length, tokens = s.get("max_model_len"), s.get("kv_tokens")
    if with_length and s.get("largest_max_model_len"):
        options.append(f"MAX_MODEL_LEN={s['largest_max_model_len']} or less")
    if s.get("smallest_tensor_parallel_size"):
        text = f"TENSOR_PARALLEL_SIZE={s['smallest_tensor_parallel_size']}"
        if s.get("tp_kv_tokens"):
            fp8 = s.get("tp_fp8_kv_tokens")
            more = f"; {fp8} with KV_CACHE_DTYPE=fp8" if fp8 else ""
            text += f" ({s['tp_kv_tokens']} tokens of KV cache{more})"
        options.append(text)
    fp8_tokens, fp8_len = s.get("fp8_kv_tokens"), s.get("fp8_max_model_len")
    if fp8_tokens and fp8_len:
        than = f" instead of {tokens}" if tokens else ""
        shorter = f" with MAX_MODEL_LEN={fp8_len} or less" if length and fp8_len < length else ""
        options.append(f"KV_CACHE_DTYPE=fp8{shorter} ({fp8_tokens} tokens{than})")
    sizes = list(s.get("gpu_sizes_that_fit") or ())
    if sizes:
        options.append(f"a RunPod GPU of {_listed(sizes)}")
    return options


def options_sentence(s: Suggestions | Mapping[str, Any], with_length: bool = True) -> str:
    """What would fit, in one sentence (``with_length=False``: without the largest
    MAX_MODEL_LEN, for an answer that already gives a length). ``s`` may be the
    ``Suggestions`` or its ``asdict`` (the estimate's ``alternatives``)."""
    found = asdict(s) if isinstance(s, Suggestions) else s
    options = _options(found, with_length)
    if options:
        return "The model would fit with " + ", or ".join(options) + "."
    tried = ["no shorter MAX_MODEL_LEN"] if with_length else []
    tried += [f"no TENSOR_PARALLEL_SIZE up to {MAX_TP}", "no KV_CACHE_DTYPE=fp8"]
    if found.get("platform", "gpu") == "gpu":
        tried.append(f"no RunPod GPU up to {RUNPOD_GPUS[-1][0]}")
    return f"Nothing tried would fit it: {_listed(tried, ' and ')}."


def render(s: Suggestions) -> str:
    """One sentence on what the cache holds, one on what would fit."""
    if s.fits is None:
        return "The fit could not be judged: the GPU's memory is not known."
    where = "per GPU" if s.platform == "gpu" else "on the CPU"
    if s.kv_memory is not None and s.kv_memory <= 0:
        first = (
            "The weights and vLLM's working memory leave no KV cache "
            f"({size_text(s.kv_memory)} {where})."
        )
    else:
        state = "fits" if s.fits else "does not fit"
        first = (
            f"MAX_MODEL_LEN={s.max_model_len} {state}: the KV cache holds "
            f"{s.kv_tokens or 0} tokens ({size_text(s.kv_memory or 0)} {where})."
        )
    if s.fits:
        return first
    return f"{first} {options_sentence(s)}"
