"""Does the model fit the memory it will get? Pure arithmetic over config.json, the
weights' sizes and the machine's inventory.

The budget per device is its total memory x GPU_MEMORY_UTILIZATION (vLLM's share); on
vLLM's CPU build it is host memory x the same flag, which that backend reserves. The
weights take their bytes per device (split over TENSOR_PARALLEL_SIZE x
PIPELINE_PARALLEL_SIZE); what is left must hold the KV cache of one request of
MAX_MODEL_LEN: layers x KV heads x head size x 2 (K and V) x cache dtype bytes per
token; the length it advises is whole blocks (16 tokens; 128 on the CPU build), one
block fewer than the cache holds, as vLLM 0.32 plans it. Every estimate errs on the side
of fitting (activations and CUDA graphs are not counted, an automatic dtype is taken at
2 bytes or less), so a predicted failure is one vLLM is sure to meet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worker.modelinfo.facts import ModelFacts
from worker.preflight.checks import text_config
from worker.preflight.prediction import Prediction
from worker.preflight.request import Request
from worker.seams.gpus import GIB, Inventory

BLOCK = 16  # tokens per KV cache block (vLLM's smallest default)
CPU_BLOCK = 128  # vLLM 0.32's CPU backend (platforms/cpu.py) unless BLOCK_SIZE is set
MARGIN = 1.02  # weights must exceed the budget by 2 % to count as "cannot fit"
# Bytes per element of checkpoint dtypes (safetensors names) and of DTYPE / KV_CACHE_DTYPE.
_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
    "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_ds_mla": 1,
}  # fmt: skip
_FLOATS = {"F64", "F32", "F16", "BF16"}


@dataclass(frozen=True)
class Budget:
    """Memory per device vLLM may use, and where the number came from."""

    platform: str  # "gpu" or "cpu"
    device_total: int  # bytes of one device (a GPU, or the host on CPU)
    device_free: int | None
    budget: int  # device_total x utilization
    devices: int
    name: str


def budget_of(inv: Inventory, req: Request, build: str) -> Budget | Prediction | None:
    """The per-device budget; a Prediction when the GPUs cannot serve the request at all;
    None when the machine's memory is unknown (no NVML on a GPU build)."""
    util = req.gpu_memory_utilization
    if inv.count:
        need = req.gpus_needed
        if need > inv.count:
            return Prediction(
                "tensor-parallel-gpu-count",
                {"ws": str(need), "gpus": str(inv.count)},
                detail=f"TENSOR_PARALLEL_SIZE x PIPELINE_PARALLEL_SIZE = {need}, but this "
                f"worker has {inv.count} GPU(s).",
            )
        used = inv.gpus[:need]
        smallest = min(used, key=lambda g: g.total_bytes)
        free = min(g.free_bytes for g in used)
        return Budget(
            "gpu", smallest.total_bytes, free, int(smallest.total_bytes * util), need,
            f"{need} x {smallest.name} ({smallest.total_bytes / GIB:.1f} GiB)",
        )  # fmt: skip
    if build == "cpu" and inv.host is not None:
        total = inv.host.total_bytes
        return Budget(
            "cpu", total, inv.host.available_bytes, int(total * util), 1,
            f"host memory ({total / GIB:.1f} GiB, vLLM CPU backend)",
        )  # fmt: skip
    return None


def _dtype_bytes(name: str | None) -> int | None:
    return _DTYPE_BYTES.get(name) if name else None


def _checkpoint_dtype(config: Mapping[str, Any]) -> str | None:
    text = text_config(config)
    value = text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype")
    return value if isinstance(value, str) else None


def _is_quantized(config: Mapping[str, Any] | None, req: Request) -> bool:
    if req.quantization:
        return True
    if not config:
        return False
    return bool(config.get("quantization_config") or text_config(config).get("quantization_config"))


def _run_dtype_bytes(req: Request, config: Mapping[str, Any] | None) -> int:
    """Bytes per weight/cache element vLLM computes in; "auto" counts at most 2."""
    explicit = _dtype_bytes(req.dtype) if req.dtype != "auto" else None
    if explicit:
        return explicit
    ckpt = _dtype_bytes(_checkpoint_dtype(config or {}))
    return min(ckpt or 2, 2)


def weight_bytes(facts: ModelFacts, req: Request) -> int | None:
    """Bytes the weights take in memory (all devices together), at most; None: unknown."""
    quantized = _is_quantized(facts.config, req)
    if facts.parameters and not quantized:
        each = _run_dtype_bytes(req, facts.config)
        total = 0
        for dtype, count in facts.parameters.items():
            size = each if dtype.upper() in _FLOATS else (_dtype_bytes(dtype.upper()) or 1)
            total += int(count) * size
        return total
    files = facts.weight_bytes_for(req.load_format)
    if files is None:
        return None
    if not quantized:
        ckpt = _dtype_bytes(_checkpoint_dtype(facts.config or {}))
        run = _run_dtype_bytes(req, facts.config)
        if ckpt and run < ckpt:
            files = files * run // ckpt
    return files


def kv_bytes_per_token(config: Mapping[str, Any], req: Request) -> int | None:
    """KV cache bytes one token takes on one device; None for layouts not modelled
    (MLA, sliding-window or hybrid attention), where the simple formula overestimates."""
    text = text_config(config)
    if any(
        text.get(k) for k in ("kv_lora_rank", "sliding_window", "layer_types", "attn_type_list")
    ):
        return None
    layers, heads = text.get("num_hidden_layers"), text.get("num_attention_heads")
    hidden = text.get("hidden_size")
    if not (isinstance(layers, int) and layers > 0 and isinstance(heads, int) and heads > 0):
        return None
    kv_heads = text.get("num_key_value_heads") or heads
    head_size = text.get("head_dim") or (hidden // heads if isinstance(hidden, int) else None)
    if not isinstance(kv_heads, int) or not isinstance(head_size, int) or head_size <= 0:
        return None
    if req.kv_cache_dtype != "auto":
        cache = _dtype_bytes(req.kv_cache_dtype)
        if cache is None:
            return None
    else:
        cache = _run_dtype_bytes(req, config)
    kv_per_device = max(1, kv_heads // req.tensor_parallel_size)
    layers_per_device = -(-layers // req.pipeline_parallel_size)
    return layers_per_device * kv_per_device * head_size * 2 * cache


def block_of(platform: str) -> int:
    return CPU_BLOCK if platform == "cpu" else BLOCK


def kv_fit(available: int, per_token: int, platform: str) -> tuple[int, int]:
    """(tokens the cache holds, the longest request vLLM 0.32 admits): whole blocks, and
    for the request one block fewer (the null block its pool holds back)."""
    block = block_of(platform)
    blocks = max(0, available) // (per_token * block)
    return blocks * block, max(0, blocks - 1) * block


def _gib(value: float) -> str:
    return f"{value / GIB:.2f}"


def check_fit(
    facts: ModelFacts,
    req: Request,
    inv: Inventory,
    build: str,
    max_len: int | None,
) -> Prediction | None:
    """The first sure memory failure: free memory below the share asked for, weights
    beyond the budget, or a KV cache that cannot hold one request of ``max_len``."""
    budget = budget_of(inv, req, build)
    if budget is None or isinstance(budget, Prediction):
        return budget
    util = req.gpu_memory_utilization
    free = budget.device_free
    if budget.platform == "gpu" and free is not None and free * MARGIN < budget.budget:
        return Prediction(
            "gpu-free-memory-below-utilization",
            {
                "free": _gib(free),
                "total": _gib(budget.device_total),
                "util": f"{util:g}",
                "want": _gib(budget.budget),
            },
            detail="(NVML, before launch).",
        )
    weights = weight_bytes(facts, req)
    if weights is None:
        return None
    per_device = weights // budget.devices
    if per_device > budget.budget * MARGIN:
        # Beyond the whole device the weights cannot even load: out of memory (on vLLM's
        # CPU build, of host memory). Within it but above vLLM's share: no KV cache room.
        rule = "kv-cache-no-memory"
        if per_device > budget.device_total:
            rule = "cuda-oom" if budget.platform == "gpu" else "host-memory-exhausted"
        return Prediction(
            rule,
            detail=f"The weights need {_gib(per_device)} GiB per device but vLLM may use "
            f"{_gib(budget.budget)} GiB of each ({budget.name} x "
            f"GPU_MEMORY_UTILIZATION {util:g}).",
        )
    per_token = kv_bytes_per_token(facts.config or {}, req) if facts.config else None
    if per_token is None or not max_len:
        return None
    available = (
        req.kv_cache_memory_bytes
        if req.kv_cache_memory_bytes is not None
        else budget.budget - per_device
    )
    need = per_token * max_len
    if need <= available:
        return None
    fit = kv_fit(available, per_token, budget.platform)[1]
    detail = (
        f"Counted before launch: {per_token} bytes of KV cache per token; the weights "
        f"take {_gib(per_device)} GiB of the {_gib(budget.budget)} GiB budget "
        f"({budget.name} x GPU_MEMORY_UTILIZATION {util:g})."
    )
    if fit == 0:  # not even one block of the cache fits (beside the null block)
        return Prediction("kv-cache-no-memory", detail=detail)
    return Prediction(
        "kv-cache-too-small-for-max-len",
        {"len": str(max_len), "need": _gib(need), "avail": _gib(available), "fit": str(fit)},
        detail=detail,
    )
