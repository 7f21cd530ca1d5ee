"""Estimate what vLLM will report at start-up for one run: ``python -m
worker.preflight.estimate`` reads one JSON object on standard input and prints one.

Input (the fit-truth table's field names; unknown keys, ``observed`` included, ignored):
``config`` (required: the model's config facts, e.g. num_hidden_layers, hidden_size,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
tie_word_embeddings, max_position_embeddings, sliding_window, num_experts,
moe_intermediate_size, num_experts_per_tok, kv_lora_rank, qk_rope_head_dim,
quantization_config, rope_scaling); ``vllm_version``, ``engine`` ("V0"/"V1"), ``dtype``,
``quantization``, ``tensor_parallel_size``, ``pipeline_parallel_size``,
``max_model_len``, ``gpu_memory_utilization`` (default 0.9), ``kv_cache_dtype``,
``block_size``, ``enforce_eager``, ``gpu`` {``total_memory_gib_printed``, ``name``},
``flags`` {``max_num_seqs``, ``lora``, ``multimodal``, ``pooling_model``};
optionally ``kv_cache_memory_bytes`` (as --kv-cache-memory-bytes sets it),
``max_num_seqs``, ``max_num_batched_tokens``, ``enable_chunked_prefill``,
``usage_context`` ("api_server" default, or "llm_class"), ``safetensors_parameters``
({dtype: count}) and ``weights_file_bytes`` (used when the config lacks layer facts).

Output: ``weights_gib`` (per device), ``kv_cache_tokens`` and ``max_model_len_fit`` (the
largest max_model_len one request of which fits the KV cache), with ``activation_gib``,
``non_torch_gib``, ``cuda_graph_gib`` (+ whether it is counted before KV sizing),
``budget_gib``, ``kv_cache_gib``, ``kv_bytes_per_token``, ``block_size``,
``kv_cache_blocks``, ``concurrency`` at ``max_model_len``, ``fits``, the resolved
``max_num_batched_tokens`` / ``max_num_seqs``, ``assumptions``; and, when it does not
fit, ``alternatives`` and ``advice``. KV figures are null when the GPU's memory is
unknown and no kv_cache_memory_bytes is given. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from worker.memory.alternatives import render, suggest
from worker.memory.arch import read_arch
from worker.memory.memory_model import MemoryEstimate, estimate_memory
from worker.memory.row_input import InputError, RunSpec, parse_row
from worker.memory.vllm_defaults import GIB


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 4)


def to_dict(spec: RunSpec, est: MemoryEstimate) -> dict[str, Any]:
    layout = est.layout
    return {
        "weights_gib": _gib(est.weights),
        "weights_basis": est.weights_basis,
        "activation_gib": _gib(est.activation),
        "non_torch_gib": _gib(est.non_torch),
        "cuda_graph_gib": _gib(est.cuda_graphs),
        "cuda_graph_counted_before_kv": est.graphs_counted,
        "budget_gib": _gib(est.budget),
        "kv_cache_gib": _gib(est.kv_memory),
        "kv_cache_source": est.kv_source,
        "kv_bytes_per_token": layout.bytes_per_token if layout else None,
        "block_size": layout.block_size if layout else None,
        "kv_cache_blocks": est.blocks,
        "kv_cache_tokens": est.tokens,
        "max_model_len": est.max_model_len,
        "max_model_len_fit": est.max_len_fit,
        "concurrency": None if est.concurrency is None else round(est.concurrency, 2),
        "fits": est.fits,
        "engine": est.engine,
        "vllm_version": ".".join(map(str, spec.version)),
        "tensor_parallel_size": spec.tp,
        "max_num_batched_tokens": est.batched_tokens,
        "max_num_seqs": est.num_seqs,
        "assumptions": list(est.assumptions),
    }


def estimate(row: Mapping[str, Any]) -> dict[str, Any]:
    """The estimate for one run (see the module docstring for the fields); raises
    ``InputError`` (a ValueError, one-line message) when the input cannot be used."""
    spec = parse_row(row)
    est = estimate_memory(spec)
    out = to_dict(spec, est)
    if est.fits is False:
        arch = read_arch(spec.config)
        found = suggest(spec, est, arch.heads if arch else None)
        out["alternatives"] = asdict(found)
        out["alternatives"]["kv_memory"] = _gib(found.kv_memory)
        out["advice"] = render(found)
    return out


def _reject_constant(name: str) -> float:
    raise InputError(f"not JSON: {name} is not allowed")


def main(argv: list[str] | None = None) -> int:
    text = sys.stdin.read()
    try:
        try:
            row = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise InputError(f"not JSON: {exc.msg} ({where})") from None
        out = estimate(row)
    except InputError as exc:
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    except RecursionError:
        print("estimate: the input is nested too deeply", file=sys.stderr)
        return 2
    with contextlib.suppress(BrokenPipeError):  # the reader went away
        print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
