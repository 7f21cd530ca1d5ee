"""``python -m worker.preflight.estimate`` (one JSON object in, one out; bad input: one
line on stderr, exit 2), the alternatives it offers when a run does not fit, and the
KV layouts vLLM builds for hybrid, MLA and tensor-parallel models."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from worker.memory.alternatives import Suggestions, options_sentence, render, size_text, suggest
from worker.memory.row_input import parse_row
from worker.preflight import estimate as estimate_cli
from worker.preflight.estimate import estimate

ROOT = Path(__file__).resolve().parents[3]
GIB = 1024**3


LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip


def _row(**extra: Any) -> dict[str, Any]:
    return {"config": LLAMA_8B, "vllm_version": "0.11.0", "gpu": {"total_memory_gib_printed": 23.58},
            "max_model_len": 131072, **extra}  # fmt: skip


def run_cli(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.preflight.estimate"],
        input=text, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip


def run_main(text: str, monkeypatch, capsys) -> subprocess.CompletedProcess[str]:
    """The CLI's ``main`` in this process (what ``python -m`` runs; a test shows the two
    agree on a bad input)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code = estimate_cli.main()
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([], code, out, err)


def test_cli_prints_one_json_object() -> None:
    done = run_cli(json.dumps(_row(max_model_len=8192)))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["weights_gib"] == pytest.approx(14.96, abs=0.05)
    assert out["kv_bytes_per_token"] == 131072
    assert out["fits"] is True and out["max_model_len_fit"] >= 8192
    assert out["kv_cache_tokens"] == out["kv_cache_blocks"] * out["block_size"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"max_model_len": 4096}', "missing field 'config'"),
        (json.dumps(_row(max_model_len="4096")), "'max_model_len' must be a number"),
        (json.dumps(_row(tensor_parallel_size=-2)), "'tensor_parallel_size' must be positive"),
        (json.dumps(_row(gpu_memory_utilization=True)), "must be a number"),
        (json.dumps(_row(gpu_memory_utilization=1.5)), "at most 1"),
        (json.dumps(_row()).replace('131072, "torch', 'NaN, "torch'), "NaN is not allowed"),
        (json.dumps(_row(config={**LLAMA_8B, "hidden_size": "4096"})), "config.hidden_size"),
        (json.dumps(_row(config={"architectures": ["X"]})), "cannot estimate the weights"),
        (json.dumps(_row(kv_cache_dtype="fp7")), "unknown cache dtype"),
    ],
)
def test_cli_rejects_bad_input_with_one_line(text: str, needle: str, monkeypatch, capsys) -> None:
    done = run_main(text, monkeypatch, capsys)
    assert done.returncode == 2
    assert done.stdout == ""
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("estimate: ")


def test_the_cli_started_answers_bad_input_as_its_main(monkeypatch, capsys) -> None:
    in_process = run_main("{not json", monkeypatch, capsys)
    started = run_cli("{not json")
    assert (started.returncode, started.stdout, started.stderr) == (2, "", in_process.stderr)


def test_alternatives_for_a_length_that_does_not_fit() -> None:
    spec = parse_row(_row())
    found = suggest(spec, heads=32)
    assert found.fits is False and found.kv_tokens
    best = found.largest_max_model_len
    assert best is not None and 0 < best < 131072
    assert estimate(_row(max_model_len=best))["fits"] is True
    assert estimate(_row(max_model_len=best + 64))["fits"] is False
    assert found.smallest_tensor_parallel_size in (2, 4, 8)
    assert estimate(_row(tensor_parallel_size=found.smallest_tensor_parallel_size))["fits"]
    assert found.fp8_kv_tokens == pytest.approx(2 * found.kv_tokens, rel=0.02)
    assert "80 GB" in found.gpu_sizes_that_fit and "16 GB" not in found.gpu_sizes_that_fit
    text = render(found)
    assert text.count(". ") == 1 and text.endswith(".")  # two sentences
    assert text.startswith("MAX_MODEL_LEN=131072 does not fit: the KV cache holds ")
    assert (
        f"The model would fit with MAX_MODEL_LEN={best} or less, or TENSOR_PARALLEL_SIZE=" in text
    )
    assert "or a RunPod GPU of " in text and "80 GB PRO (H100)" in text


def test_alternatives_when_the_weights_alone_do_not_fit() -> None:
    big = {**LLAMA_8B, "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 28672,
           "num_attention_heads": 64}  # fmt: skip
    found = suggest(parse_row(_row(config=big, max_model_len=4096)), heads=64)
    assert found.fits is False and (found.kv_memory or 0) < 0
    assert found.largest_max_model_len is None and found.fp8_kv_tokens == 0
    assert found.smallest_tensor_parallel_size == 8
    assert found.gpu_sizes_that_fit == ("180 GB (B200)",)
    assert "leave no KV cache" in render(found)


def test_sizes_are_said_in_gib_or_mib() -> None:
    assert size_text(1.5 * GIB) == "1.50 GiB"
    assert size_text(3 * 1024**2) == "3.00 MiB"
    nothing = Suggestions(None, 4096, None, None, None, None, None, None, ())
    assert "not known" in render(nothing)


GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"], "num_hidden_layers": 62, "hidden_size": 5376,
    "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 16,
    "head_dim": 128, "vocab_size": 262208, "tie_word_embeddings": True,
    "sliding_window": 1024, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}  # fmt: skip


def test_hybrid_layers_form_vllm_groups_in_v1_only() -> None:
    """Gemma 3: 52 sliding + 10 full layers. V0 sizes all 62 alike; V1 (0.10+) makes 7
    groups of 10 layers (6 sliding, 1 full; 8 padding layers) and a request's sliding
    layers need at most their window."""
    base = {"config": GEMMA3, "kv_cache_memory_bytes": 16 * GIB, "max_model_len": 32768}
    per_layer = 2 * 16 * 128 * 2
    v0 = estimate(base | {"vllm_version": "0.8.2", "engine": "V0"})
    v1 = estimate(base | {"vllm_version": "0.11.0", "engine": "V1"})
    assert v0["kv_bytes_per_token"] == 62 * per_layer
    assert v1["kv_bytes_per_token"] == 70 * per_layer
    assert v0["max_model_len_fit"] == v0["kv_cache_tokens"] < 131072
    assert v1["max_model_len_fit"] > v1["kv_cache_tokens"]
    assert v1["max_model_len_fit"] == 131072  # Gemma 3's limit is not scaled by its rope


def test_mla_caches_one_latent_per_token_on_every_rank() -> None:
    mla = {
        "architectures": ["DeepseekV2ForCausalLM"], "num_hidden_layers": 27, "hidden_size": 2048,
        "intermediate_size": 10944, "num_attention_heads": 16, "vocab_size": 102400,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "num_experts": 64, "moe_intermediate_size": 1408, "n_shared_experts": 2,
        "num_experts_per_tok": 6, "first_k_dense_replace": 1, "max_position_embeddings": 163840,
    }  # fmt: skip
    for tp in (1, 2):
        out = estimate({"config": mla, "vllm_version": "0.8.3", "tensor_parallel_size": tp})
        assert out["kv_bytes_per_token"] == 27 * (512 + 64) * 2
    one = estimate({"config": mla, "vllm_version": "0.8.3"})
    assert one["weights_gib"] == pytest.approx(29.3, abs=0.2)  # 15.7B parameters in BF16
    old = estimate({"config": mla, "vllm_version": "0.6.3", "engine": "V0"})
    assert old["kv_bytes_per_token"] == 27 * 2 * 16 * 192 * 2  # before MLA caching


def test_kv_heads_are_split_then_replicated_over_tensor_parallel_ranks() -> None:
    per_tp = {
        tp: estimate(_row(tensor_parallel_size=tp))["kv_bytes_per_token"] for tp in (1, 2, 8, 16)
    }
    assert per_tp == {1: 131072, 2: 65536, 8: 16384, 16: 16384}


TINY = {  # tests/support/tiny_model.py: float32, 2 layers x 1 KV head x 64 = 1024 B/token
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
    "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 350,
    "max_position_embeddings": 2048,
}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "block", "tokens", "longest"),
    [
        # vLLM 0.32's CPU build: blocks of 128 tokens, 7 in 1,000,000 bytes, one held back
        # (the null block): it serves MAX_MODEL_LEN=auto at 768 (the real run's figure).
        ({"engine": "cpu"}, 128, 896, 768),
        ({"platform": "cpu"}, 128, 896, 768),
        # A GPU: blocks of 16, 61 of them, one held back in 0.32; none before.
        ({}, 16, 976, 960),
        ({"vllm_version": "0.26.1"}, 16, 976, 976),
        ({"engine": "cpu", "vllm_version": "0.26.1"}, 16, 976, 976),
        ({"engine": "cpu", "block_size": 32}, 32, 960, 928),
    ],
)
def test_kv_blocks_by_platform_and_the_null_block(extra, block, tokens, longest) -> None:
    row = {"config": TINY, "vllm_version": "0.32.0", "dtype": "float32",
           "kv_cache_memory_bytes": 1_000_000, "max_model_len": 2048} | extra  # fmt: skip
    out = estimate(row)
    assert (out["block_size"], out["kv_cache_tokens"], out["max_model_len_fit"]) == (
        block,
        tokens,
        longest,
    )
    assert out["fits"] is False and f"MAX_MODEL_LEN={longest} or less" in out["advice"]
    if extra.get("engine") == "cpu" or extra.get("platform") == "cpu":
        assert "RunPod GPU" not in out["advice"] and "on the CPU" in out["advice"]


def test_the_alternatives_say_what_would_fit_in_one_sentence() -> None:
    found = suggest(parse_row(_row(max_model_len=131072, vllm_version="0.32.0")), heads=32)
    text = options_sentence(found)
    assert text.startswith("The model would fit with MAX_MODEL_LEN=") and text.count(". ") == 0
    assert f"KV_CACHE_DTYPE=fp8 with MAX_MODEL_LEN={found.fp8_max_model_len} or less" in text
    short = options_sentence(asdict(found), with_length=False)  # as the estimate keeps it
    assert short.startswith("The model would fit with TENSOR_PARALLEL_SIZE=")
    nowhere = Suggestions(False, 8192, -GIB, 0, None, None, 0, 0, ())
    assert options_sentence(nowhere) == (
        "Nothing tried would fit it: no shorter MAX_MODEL_LEN, no TENSOR_PARALLEL_SIZE up to 8,"
        " no KV_CACHE_DTYPE=fp8 and no RunPod GPU up to 180 GB (B200)."
    )
