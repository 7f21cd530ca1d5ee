"""The architecture facts of a model, read from its config facts (config.json's keys, as
the fit-truth table names them), in the shape vLLM builds its layers from.

Pure: no I/O. ``read_arch(config)`` returns an ``Arch`` (None when the facts cannot
describe the layers); ``read_quant(config, quantization)`` the weight quantization scheme.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Architectures whose state is not (only) an attention KV cache; vLLM sizes their
# Mamba/linear-attention state differently, which this model does not reproduce.
HYBRID_STATE_ARCHS = (
    "Mamba", "Jamba", "Zamba", "Bamba", "NemotronH", "FalconH1", "GraniteMoeHybrid",
    "Qwen3Next", "Plamo2", "Lfm2", "MiniMaxText01", "Rwkv",
)  # fmt: skip
# Models whose layers alternate sliding-window and full attention (pattern length), used
# when the config facts do not list ``layer_types`` / ``sliding_window_pattern``.
SLIDING_PATTERN = {"Gemma2": 2, "Gemma3": 6, "Cohere2": 4}
# Families whose ``sliding_window`` is inert unless ``use_sliding_window`` is true.
USE_SLIDING_FLAG = ("Qwen2", "Qwen3")


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a (possibly multimodal) config."""
    inner = config.get("text_config")
    if isinstance(inner, Mapping):
        return {**config, **inner}
    return config


def _int(cfg: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value > 0:
            return value
        if isinstance(value, float) and value > 0 and value.is_integer():
            return int(value)
    return None


@dataclass(frozen=True)
class Mla:
    """DeepSeek multi-head latent attention ranks."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Arch:
    """What vLLM builds: decoder layers, attention shape, MLP or experts, vocabulary."""

    arch_name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int | None
    tied: bool
    lm_head: bool  # False for encoder-style "...Model" pooling architectures
    experts: int  # 0: dense
    expert_intermediate: int
    top_k: int
    shared_intermediate: int
    dense_layers: int  # leading dense layers in a MoE model (first_k_dense_replace)
    qkv_bias: bool
    mla: Mla | None
    sliding_window: int | None
    sliding_pattern: int | None  # every n-th layer is full attention; None: all alike
    layer_types: tuple[str, ...] | None
    max_position: int | None
    rope_rows: int | None  # rows of the rotary cos/sin cache (positions x scaling)
    derived_max_len: int | None  # vLLM's limit for max_model_len (positions x rope factor)
    rotary_dim: int
    hybrid_state: bool

    @property
    def moe(self) -> bool:
        return self.experts > 0


def _rope(cfg: Mapping[str, Any], max_pos: int | None) -> tuple[int | None, int | None]:
    """(rows of vLLM's rotary cos/sin cache, vLLM's derived max_model_len limit; vLLM
    does not scale Gemma 3's limit by its rope factor)."""
    if max_pos is None:
        return None, None
    scaling = cfg.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        return max_pos, max_pos
    kind = str(scaling.get("rope_type") or scaling.get("type") or "default")
    factor = scaling.get("factor")
    factor = float(factor) if isinstance(factor, int | float) and factor > 0 else 1.0
    orig = _int(scaling, "original_max_position_embeddings") or max_pos
    if kind in ("linear", "dynamic"):
        return int(max_pos * factor), int(max_pos * factor)
    if kind in ("yarn", "deepseek_yarn"):
        return int(orig * factor), int(orig * factor)
    if kind in ("longrope", "su"):
        return max_pos + orig, max_pos
    return max_pos, max_pos


def _mla(cfg: Mapping[str, Any]) -> Mla | None:
    rank = _int(cfg, "kv_lora_rank")
    rope = _int(cfg, "qk_rope_head_dim")
    nope = _int(cfg, "qk_nope_head_dim")
    if rank is None or rope is None or nope is None:
        return None
    v_dim = _int(cfg, "v_head_dim") or nope
    return Mla(rank, _int(cfg, "q_lora_rank"), nope, rope, v_dim)


def _layer_types(cfg: Mapping[str, Any]) -> tuple[str, ...] | None:
    types = cfg.get("layer_types")
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        return tuple(types)
    return None


def _sliding(cfg: Mapping[str, Any], name: str) -> tuple[int | None, int | None]:
    window = _int(cfg, "sliding_window")
    if window is None:
        return None, None
    if name.startswith(USE_SLIDING_FLAG) and cfg.get("use_sliding_window") is not True:
        return None, None
    if cfg.get("use_sliding_window") is False:
        return None, None
    pattern = _int(cfg, "sliding_window_pattern")
    if pattern is None:
        pattern = next((n for k, n in SLIDING_PATTERN.items() if name.startswith(k)), None)
    return window, pattern


def read_arch(config: Mapping[str, Any]) -> Arch | None:
    """The layer shapes, or None when the facts lack layers, width or heads."""
    cfg = text_config(config)
    archs = cfg.get("architectures")
    name = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(cfg, "hidden_size", "d_model", "n_embd")
    heads = _int(cfg, "num_attention_heads", "n_head")
    if layers is None or hidden is None or heads is None:
        return None
    head_dim = _int(cfg, "head_dim") or hidden // heads
    experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts") or 0
    inter = _int(cfg, "intermediate_size", "ffn_hidden_size") or (4 * hidden)
    expert_inter = _int(cfg, "moe_intermediate_size") or inter
    shared = _int(cfg, "shared_expert_intermediate_size") or 0
    n_shared = _int(cfg, "n_shared_experts") or 0
    if n_shared and not shared:
        shared = n_shared * expert_inter
    window, pattern = _sliding(cfg, name)
    max_pos = _int(cfg, "max_position_embeddings", "n_positions", "max_seq_len")
    partial = cfg.get("partial_rotary_factor")
    rotary = head_dim
    if isinstance(partial, int | float) and 0 < partial < 1:
        rotary = int(head_dim * partial)
    mla = _mla(cfg)
    if mla is not None:
        rotary = mla.qk_rope_head_dim
    tied = cfg.get("tie_word_embeddings")
    rope_rows, derived = _rope(cfg, max_pos)
    if name.startswith("Gemma3") or str(cfg.get("model_type", "")).startswith("gemma3"):
        derived = max_pos
    return Arch(
        arch_name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", "num_kv_heads") or heads,
        head_dim=head_dim,
        intermediate=inter,
        vocab=_int(cfg, "vocab_size", "padded_vocab_size"),
        tied=tied is True,
        lm_head=not (name.endswith("Model") and not name.endswith("LMHeadModel")),
        experts=experts,
        expert_intermediate=expert_inter,
        top_k=_int(cfg, "num_experts_per_tok", "moe_topk", "top_k") or (2 if experts else 0),
        shared_intermediate=shared,
        dense_layers=min(_int(cfg, "first_k_dense_replace") or 0, layers) if experts else 0,
        qkv_bias=cfg.get("attention_bias") is True or name.startswith("Qwen2"),
        mla=mla,
        sliding_window=window,
        sliding_pattern=pattern,
        layer_types=_layer_types(cfg),
        max_position=max_pos,
        rope_rows=rope_rows,
        derived_max_len=derived,
        rotary_dim=rotary,
        hybrid_state=any(h in name for h in HYBRID_STATE_ARCHS),
    )


@dataclass(frozen=True)
class Quant:
    """How the linear layers' weights are stored in memory."""

    method: str  # "none", "awq", "gptq", "fp8", "int8", "bnb4", "bnb8", "nvfp4", "mxfp4"
    bits: int
    group_size: int  # input rows per scale; 0: one scale per output channel or tensor
    zero_points: bool
    marlin: bool  # repacked for Marlin kernels (no zero points when symmetric, no g_idx)
    keep_attention: bool  # attention projections left unquantized (modules_to_not_convert)
    scale_bytes: float = 2.0  # bytes of one group scale (fp16; fp32 absmax; fp8 block scale)


NO_QUANT = Quant("none", 16, 0, False, False, False)
_WORD = re.compile(r"[a-z0-9_\-]+")


def _method_word(text: object) -> str:
    if not isinstance(text, str):
        return ""
    found = _WORD.search(text.lower())
    return found.group(0) if found else ""


def _ct_quant(qc: Mapping[str, Any]) -> Quant:
    """compressed-tensors: the first config group's weight scheme."""
    groups = qc.get("config_groups")
    weights: Mapping[str, Any] = {}
    if isinstance(groups, Mapping):
        first: object = next(iter(groups.values()), {})
        if isinstance(first, Mapping) and isinstance(first.get("weights"), Mapping):
            weights = first["weights"]
    bits = _int(weights, "num_bits") or 8
    group = _int(weights, "group_size") or 0
    kind = str(weights.get("type") or "int")
    if bits == 4 and kind == "float":
        return Quant("nvfp4", 4, group or 16, False, False, False, 1.0)
    if bits <= 4:
        zp = weights.get("symmetric") is False
        return Quant("gptq", bits, group, zp, True, False)
    return Quant("fp8" if kind == "float" else "int8", 8, group, False, False, False)


def read_quant(config: Mapping[str, Any], quantization: object, fp32_absmax: bool) -> Quant:
    """The weight scheme from ``quantization_config`` and the engine's ``quantization``.
    ``fp32_absmax``: vLLM (0.9+) dequantizes bitsandbytes' double-quantized absmax."""
    cfg = text_config(config)
    qc = cfg.get("quantization_config")
    qc = qc if isinstance(qc, Mapping) else {}
    engine_word = _method_word(quantization)
    method = _method_word(qc.get("quant_method")) or engine_word
    text = f"{qc.get('quant_method') or ''} {quantization or ''}".lower()
    keep = qc.get("modules_to_not_convert") or qc.get("ignore") or ()
    keep_attn = isinstance(keep, list) and any("attn" in str(m) for m in keep)
    bits = _int(qc, "bits", "w_bit", "weight_bits") or 4
    group = qc.get("group_size", qc.get("q_group_size"))
    group_size = 128 if group is None else (group if isinstance(group, int) and group > 0 else 0)
    if method.startswith("awq"):
        return Quant("awq", bits, group_size, True, "marlin" in engine_word, False)
    if method.startswith(("gptq", "auto-round", "autoround")):
        sym = qc.get("sym") is not False
        marlin = "marlin" in engine_word or engine_word == ""
        return Quant("gptq", bits, group_size, not (marlin and sym), marlin, False)
    if method == "compressed-tensors" or method == "compressed_tensors":
        return _ct_quant(qc)
    if method.startswith("bitsandbytes") or method == "bnb":
        if qc.get("load_in_8bit") is True:
            return Quant("bnb8", 8, 0, False, False, False, 4.0)
        # one absmax per 64 weights: in-flight quantization (compress_statistics=True)
        # and double-quantized checkpoints store 8-bit codes plus a tiny second level,
        # which vLLM 0.9+ dequantizes to fp32 at load
        nested = not qc or qc.get("bnb_4bit_use_double_quant") is True
        scale = 1.0625 if nested and not fp32_absmax else 4.0
        return Quant("bnb4", 4, 64, False, False, False, scale)
    if "fp4" in text and "mx" in text:
        return Quant("mxfp4", 4, 32, False, False, False, 1.0)
    if "fp4" in text:
        return Quant("nvfp4", 4, 16, False, False, False, 1.0)
    if "fp8" in text or method in ("fbgemm_fp8", "ptpc_fp8"):
        block = qc.get("weight_block_size")
        size = block[0] if isinstance(block, list) and block and isinstance(block[0], int) else 0
        return Quant("fp8", 8, size, False, False, keep_attn, 4.0)
    if method in ("experts_int8", "int8", "w8a8"):
        return Quant("int8", 8, 0, False, False, keep_attn)
    return NO_QUANT
