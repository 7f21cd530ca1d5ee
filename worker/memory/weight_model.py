"""Bytes the weights take on each device, as vLLM lays them out.

From the config facts: every linear layer at its stored size (quantized layouts with
their packed weights, group scales and zero points), the vocabulary padded to 64 and
split over tensor-parallel ranks, KV heads replicated when there are fewer of them than
ranks, the MoE router replicated, embeddings and lm_head (once when tied) on the first
and last pipeline stage, norms, and the rotary cos/sin cache vLLM keeps per model.
Without the facts: safetensors parameter counts by dtype, or the weight files' bytes.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from worker.memory.arch import Arch, Quant

VOCAB_PADDING = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE
_FLOAT_DTYPES: dict[str, float] = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
_OTHER_DTYPES: dict[str, float] = {
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F4": 0.5, "I64": 8, "I32": 4, "U32": 4,
    "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}  # fmt: skip


def pad_vocab(vocab: int) -> int:
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


def stage_layers(layers: int, pp: int) -> list[int]:
    """Decoder layers per pipeline stage (vLLM's get_pp_indices: the remainder goes to
    the stages before the last)."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def linear_bytes(k: int, n: int, quant: Quant, dtype_bytes: int) -> float:
    """Stored bytes of one linear layer with k inputs and n outputs (this rank's shard)."""
    method = quant.method
    if method == "none":
        return k * n * dtype_bytes
    if method in ("fp8", "int8"):
        scales = (k / quant.group_size) * (n / quant.group_size) if quant.group_size else n
        return k * n + scales * quant.scale_bytes
    if method == "bnb8":
        return k * n + n * quant.scale_bytes
    packed = k * n * quant.bits / 8
    if method in ("bnb4", "nvfp4", "mxfp4"):
        return packed + k * n / quant.group_size * quant.scale_bytes
    groups = k / quant.group_size if quant.group_size else 1
    total = packed + groups * n * quant.scale_bytes
    if quant.zero_points:
        total += groups * n * quant.bits / 8
    if method == "gptq" and not quant.marlin:
        total += k * 4  # g_idx
    return total


@dataclass(frozen=True)
class Parallel:
    tp: int
    pp: int


def _attention_bytes(a: Arch, quant: Quant, p: Parallel, dt: int) -> float:
    q = quant if not quant.keep_attention else Quant("none", 16, 0, False, False, False)
    h, t = a.hidden, p.tp
    if a.mla is not None:
        m = a.mla
        heads = max(1, a.heads // t)
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q_bytes = linear_bytes(h, m.q_lora_rank, q, dt)
            q_bytes += linear_bytes(m.q_lora_rank, heads * qk, q, dt) + m.q_lora_rank * dt
        else:
            q_bytes = linear_bytes(h, heads * qk, q, dt)
        kv_a = linear_bytes(h, m.kv_lora_rank + m.qk_rope_head_dim, q, dt)
        kv_b_n = heads * (m.qk_nope_head_dim + m.v_head_dim)
        kv_b = linear_bytes(m.kv_lora_rank, kv_b_n, q, dt)
        if q.method != "none":  # the MLA backend keeps a dequantized copy of kv_b
            kv_b += m.kv_lora_rank * kv_b_n * dt
        o = linear_bytes(heads * m.v_head_dim, h, q, dt)
        return q_bytes + kv_a + kv_b + o + m.kv_lora_rank * dt
    q_out = a.heads * a.head_dim // t
    kv_out = 2 * max(1, a.kv_heads // t) * a.head_dim
    total = linear_bytes(h, q_out + kv_out, q, dt) + linear_bytes(q_out, h, q, dt)
    if a.qkv_bias:
        total += (q_out + kv_out) * dt
    return total


def _mlp_bytes(a: Arch, quant: Quant, p: Parallel, dt: int, dense: bool) -> float:
    h, t = a.hidden, p.tp
    if dense or not a.moe:
        inter = a.intermediate // t
        return linear_bytes(h, 2 * inter, quant, dt) + linear_bytes(inter, h, quant, dt)
    n = a.expert_intermediate // t
    experts = a.experts * (linear_bytes(h, 2 * n, quant, dt) + linear_bytes(n, h, quant, dt))
    router = h * a.experts * dt
    shared = 0.0
    if a.shared_intermediate:
        s = a.shared_intermediate // t
        shared = linear_bytes(h, 2 * s, quant, dt) + linear_bytes(s, h, quant, dt)
    return experts + router + shared


def rope_cache_bytes(a: Arch, dt: int, max_model_len: int | None) -> float:
    rows = a.rope_rows if a.rope_rows is not None else max_model_len
    return float(rows or 0) * a.rotary_dim * dt


def config_weight_bytes(
    a: Arch, quant: Quant, p: Parallel, dt: int, max_model_len: int | None
) -> list[float]:
    """Bytes per device for each pipeline stage (tensor-parallel ranks are alike)."""
    vocab_shard = pad_vocab(a.vocab or 0) // p.tp * a.hidden * dt
    per_layer_attn = _attention_bytes(a, quant, p, dt) + 2 * a.hidden * dt
    moe_layer = _mlp_bytes(a, quant, p, dt, dense=False)
    dense_layer = _mlp_bytes(a, quant, p, dt, dense=True)
    stages: list[float] = []
    first = 0
    for s, count in enumerate(stage_layers(a.layers, p.pp)):
        dense = max(0, min(a.dense_layers, first + count) - first)
        total = count * per_layer_attn + dense * dense_layer + (count - dense) * moe_layer
        first += count
        if s == 0:
            total += vocab_shard
        if s == p.pp - 1:
            total += a.hidden * dt
            if a.lm_head and (not a.tied or p.pp > 1):
                total += vocab_shard
        total += rope_cache_bytes(a, dt, max_model_len)
        stages.append(total)
    return stages


def safetensors_weight_bytes(
    parameters: Mapping[str, int], quantized: bool, dt: int, world: int
) -> float:
    """Bytes per device from the hub's parameter counts by dtype: floats at the dtype
    vLLM computes in (as stored when the checkpoint is quantized), others as stored."""
    total = 0.0
    for name, count in parameters.items():
        key = name.upper()
        size: float
        if key in _FLOAT_DTYPES:
            size = _FLOAT_DTYPES[key] if quantized and key == "F32" else dt
        else:
            size = _OTHER_DTYPES.get(key, 1)
        total += count * size
    return total / world


def file_weight_bytes(file_bytes: int, ckpt_dt: int | None, dt: int, world: int) -> float:
    """Bytes per device from the weight files' size (cast down when vLLM computes in a
    narrower dtype than the checkpoint's)."""
    scale = dt / ckpt_dt if ckpt_dt and dt < ckpt_dt else 1.0
    return file_bytes * scale / world
