"""What vLLM will report at start-up, estimated the way vLLM budgets memory.

Per device: the budget is total memory x gpu_memory_utilization; vLLM's profile run
(max_num_batched_tokens tokens over max_num_seqs sequences, then the sampler over
max_num_seqs x vocabulary logits) measures the peak activation; memory outside torch
(non-torch) and, from V1 0.21 when graphs are captured, the CUDA-graph estimate are
taken too; what is left, or ``--kv-cache-memory-bytes`` when set, is the KV cache, in
blocks of ``block_size`` tokens (16; 128 on vLLM 0.32's CPU build: see kv_layout,
vllm_defaults). Every constant here comes from vLLM's code or from the calibration rows
of fixtures/fit-truth (see vllm_defaults).

``estimate_memory(spec)`` returns a ``MemoryEstimate``. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from worker.memory import kv_layout as kv
from worker.memory import vllm_defaults as vd
from worker.memory.arch import Arch, Quant, read_arch, read_quant
from worker.memory.row_input import InputError, RunSpec
from worker.memory.weight_model import (
    Parallel,
    config_weight_bytes,
    file_weight_bytes,
    rope_cache_bytes,
    safetensors_weight_bytes,
    stage_layers,
)

MOE_CHUNK = 32768  # VLLM_FUSED_MOE_CHUNK_SIZE


@dataclass
class MemoryEstimate:
    """Bytes per device (the busiest pipeline stage), and what they imply."""

    weights: float
    weights_basis: str
    activation: float
    non_torch: float
    cuda_graphs: float
    graphs_counted: bool
    budget: float | None
    kv_memory: float | None
    kv_source: str | None
    layout: kv.KvLayout | None
    blocks: int | None
    tokens: int | None
    max_model_len: int
    max_len_fit: int | None
    concurrency: float | None
    engine: str
    batched_tokens: int
    num_seqs: int
    assumptions: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool | None:
        if self.kv_memory is None or self.max_len_fit is None:
            return None
        return self.kv_memory > 0 and self.max_len_fit >= self.max_model_len


def forward_peak(a: Arch, tokens: int, tp: int, act: int) -> float:
    """Live tensors at the widest point of one decoder layer in the profile's forward."""
    h = a.hidden
    base = 3 * tokens * h * act  # residual, normed input, layer output
    if a.mla is not None:
        heads = max(1, a.heads // tp)
        qk = a.mla.qk_nope_head_dim + a.mla.qk_rope_head_dim
        attn = tokens * heads * (3 * qk + a.mla.v_head_dim) * act
    else:
        q_out = a.heads * a.head_dim // tp
        attn = tokens * (2 * q_out + 2 * max(1, a.kv_heads // tp) * a.head_dim) * act
    dense = tokens * 3 * (a.intermediate // tp) * act
    mlp = dense if (not a.moe or a.dense_layers) else 0.0
    if a.moe:
        m = min(tokens, MOE_CHUNK)
        n = a.expert_intermediate // tp
        moe = m * a.top_k * (max(2 * n, h) + n) * act + tokens * a.experts * 4
        moe += tokens * 3 * (a.shared_intermediate // tp) * act
        mlp = max(mlp, moe)
    return base + max(attn, mlp)


def sampler_peak(a: Arch, spec: RunSpec, engine: str, rows: int, tokens: int) -> float:
    if not a.lm_head or spec.pooling or not a.vocab:
        return 0.0
    per_logit = vd.sampler_bytes(engine, spec.version)
    return rows * a.vocab * per_logit + tokens * a.hidden * spec.dtype_bytes


def _weights(spec: RunSpec, a: Arch | None, q: Quant, notes: list[str]) -> tuple[list[float], str]:
    world = spec.tp * spec.pp
    quantized = q.method != "none"
    if a is not None and a.vocab:
        stages = config_weight_bytes(a, q, Parallel(spec.tp, spec.pp), spec.dtype_bytes,
                                     spec.max_model_len)  # fmt: skip
        if a.rope_rows is None:
            notes.append("rotary cache sized for max_model_len (max_position_embeddings unknown)")
        return stages, "config"
    rope = rope_cache_bytes(a, spec.dtype_bytes, spec.max_model_len) if a else 0.0
    if spec.safetensors_parameters:
        total = safetensors_weight_bytes(
            spec.safetensors_parameters, quantized, spec.dtype_bytes, world
        )
        return [total + rope] * spec.pp, "safetensors parameter counts"
    if spec.weights_file_bytes:
        ckpt = spec.config.get("torch_dtype")
        ckpt_bytes = {"float32": 4, "float16": 2, "bfloat16": 2}.get(str(ckpt))
        total = file_weight_bytes(spec.weights_file_bytes, ckpt_bytes, spec.dtype_bytes, world)
        return [total + rope] * spec.pp, "weight file sizes"
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads")
    absent = ", ".join(k for k in keys if not spec.config.get(k)) or "usable layer facts"
    missing = absent if a is None else "vocab_size"
    raise InputError(
        f"cannot estimate the weights: config lacks {missing}; give "
        "safetensors_parameters or weights_file_bytes"
    )


def _scheduler(spec: RunSpec, a: Arch | None, max_len: int) -> vd.Scheduler:
    ask = vd.SchedulerAsk(
        engine=spec.engine, version=spec.version, max_model_len=max_len,
        gpu_total=spec.gpu_total, gpu_name=spec.gpu_name, llm_class=spec.llm_class,
        multimodal=spec.multimodal, pooling=spec.pooling or (a is not None and not a.lm_head),
        sliding=a is not None and a.sliding_window is not None, lora=spec.lora,
        batched_tokens=spec.max_num_batched_tokens, num_seqs=spec.max_num_seqs,
        chunked=spec.chunked_prefill,
    )  # fmt: skip
    return vd.scheduler_defaults(ask)


def _notes(spec: RunSpec, a: Arch | None, notes: list[str]) -> None:
    if not spec.version_given:
        notes.append(f"vLLM version unknown: {'.'.join(map(str, spec.version))}'s rules assumed")
    if spec.multimodal:
        notes.append("multimodal: the vision/audio tower and its profile run are not counted")
    if spec.lora:
        notes.append("LoRA: adapter slots and their buffers are not counted")
    if a is not None and a.hybrid_state:
        notes.append("hybrid Mamba/linear-attention state is not modelled")
    if spec.gpu_total is None and spec.kv_cache_memory is None:
        notes.append("GPU memory unknown: no KV cache estimate")


def estimate_memory(spec: RunSpec) -> MemoryEstimate:
    a = read_arch(spec.config)
    q = read_quant(spec.config, spec.quantization, spec.version >= (0, 9, 0))
    notes: list[str] = []
    stages, basis = _weights(spec, a, q, notes)
    max_len = spec.max_model_len or (a.derived_max_len if a else None) or 2048
    if spec.max_model_len is None:
        notes.append(f"max_model_len unset: {max_len} (the model's own limit, or 2048)")
    _notes(spec, a, notes)
    sched = _scheduler(spec, a, max_len)
    act = 0.0
    if a is not None:
        rows = min(sched.max_num_seqs, sched.max_num_batched_tokens)
        act = max(
            forward_peak(a, sched.max_num_batched_tokens, spec.tp, spec.dtype_bytes),
            sampler_peak(a, spec, spec.engine, rows, sched.max_num_batched_tokens),
        )
    non_torch = vd.non_torch_bytes(spec.engine, spec.version)
    parts = stage_layers(a.layers, spec.pp) if a else [0] * spec.pp
    graphs, counted = 0.0, False
    if not spec.enforce_eager:
        sizes = vd.capture_sizes(spec.engine, spec.version, sched.max_num_seqs,
                                 sched.max_num_batched_tokens)  # fmt: skip
        graphs = vd.graph_bytes(spec.engine, max(parts), sizes)
        counted = vd.graphs_counted_before_kv(spec.engine, spec.version, spec.enforce_eager)
    budget = spec.gpu_total * spec.util if spec.gpu_total is not None else None
    est = MemoryEstimate(
        weights=max(stages), weights_basis=basis, activation=act, non_torch=non_torch,
        cuda_graphs=graphs, graphs_counted=counted, budget=budget, kv_memory=None,
        kv_source=None, layout=None, blocks=None, tokens=None, max_model_len=max_len,
        max_len_fit=None, concurrency=None, engine=spec.engine,
        batched_tokens=sched.max_num_batched_tokens, num_seqs=sched.max_num_seqs,
        assumptions=notes,
    )  # fmt: skip
    _size_kv(spec, a, est, stages, parts)
    return est


def _stage_memory(spec: RunSpec, est: MemoryEstimate, weights: float) -> float | None:
    if spec.kv_cache_memory is not None:
        return spec.kv_cache_memory
    if est.budget is None:
        return None
    graphs = est.cuda_graphs if est.graphs_counted else 0.0
    return est.budget - weights - est.non_torch - est.activation - graphs


def _size_kv(
    spec: RunSpec, a: Arch | None, est: MemoryEstimate, stages: list[float], parts: list[int]
) -> None:
    if a is None:
        est.assumptions.append("no layer facts: the KV cache is not estimated")
        return
    use_mla = vd.uses_mla_cache(spec.engine, spec.version)
    per_layer = kv.token_layer_bytes(a, spec.tp, spec.cache_bytes, use_mla)
    model_type = str(spec.config.get("model_type") or "")
    block = spec.block_size or vd.default_block_size(
        spec.platform, spec.version, a.mla is not None and use_mla, model_type
    )
    reserved = vd.reserved_blocks(spec.engine, spec.version)
    hybrid = vd.hybrid_allocator(spec.engine, spec.version)
    if a.hybrid_state:
        est.assumptions.append("the KV cache of a hybrid Mamba model is not estimated")
        return
    cap = max(a.derived_max_len, est.max_model_len) if a.derived_max_len else None
    best: tuple[int, int, float, kv.KvLayout, int] | None = None
    first = 0
    for weights, count in zip(stages, parts, strict=True):
        kinds = kv.layer_kinds(a, first, count)
        first += count
        layout = kv.build_layout(a, kinds, per_layer, block, spec.engine == "V1", hybrid,
                                 est.batched_tokens)  # fmt: skip
        layout = replace(layout, reserved_blocks=reserved)
        memory = _stage_memory(spec, est, weights)
        if memory is None:
            est.layout = layout
            return
        tokens = kv.tokens_for_memory(layout, memory)
        if spec.engine == "V0":  # V0 refuses max_model_len above blocks x block_size
            fit = min(tokens, cap or tokens)
        else:
            fit = kv.longest_fitting_length(layout, memory, cap)
        if best is None or fit < best[1]:
            best = (tokens, fit, memory, layout, kv.blocks_for_memory(layout, memory))
    if best is None:
        return
    est.tokens, est.max_len_fit, est.kv_memory, est.layout, est.blocks = best
    est.kv_source = "kv_cache_memory_bytes" if spec.kv_cache_memory is not None else "budget"
    est.concurrency = kv.concurrency(est.layout, est.kv_memory, est.max_model_len)
