"""A fit that answers with what would work (issue 20 §2): when the pre-flight predicts
that a model does not fit, its answer keeps the rule pack's cause and fix and adds, after
what it measured, one sentence from the memory model's numbers for this machine: the
largest MAX_MODEL_LEN (in the fix, when the rule gives one), the smallest
TENSOR_PARALLEL_SIZE, KV_CACHE_DTYPE=fp8, and the RunPod GPU sizes that would fit."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from diagnostics import classify_lines
from tests.support.model_configs import LLAMA_8B, LLAMA_70B
from tests.support.packs import shipped_pack
from tests.support.vllm_env import ROOT
from worker.modelinfo.facts import ModelFacts
from worker.preflight import disk, run
from worker.seams.gpus import GIB, Gpu, HostMemory, Inventory

PACK = shipped_pack()
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
LLAMA_405B = {**LLAMA_8B, "num_hidden_layers": 126, "hidden_size": 16384,
              "intermediate_size": 53248, "num_attention_heads": 128}  # fmt: skip
BEFORE = "Found by the pre-flight check before launch; vLLM was not started."


def one_gpu(name: str = "NVIDIA RTX A5000", gib: float = 23.58) -> Inventory:
    return Inventory(gpus=(Gpu(0, name, int(gib * GIB), int(gib * GIB * 0.99), (8, 6)),))


def answer(monkeypatch, facts: ModelFacts, args: list[str], inv: Inventory, build="gpu"):
    monkeypatch.setattr(run, "read_facts", lambda *_a, **_k: facts)
    registry = run.load_registry()
    registry = SimpleNamespace(**{**vars(registry), "build": build}) if build != "gpu" else registry
    settings = SimpleNamespace(model="org/m", vllm_args=["--model", "org/m", *args])
    result = run.run_preflight(settings, {"HF_HUB_OFFLINE": "1"}, pack=PACK, timeout=5,
                               sdk_checks=False, inventory=lambda: inv,
                               registry=registry)  # fmt: skip
    assert result.diagnosis is not None
    print(result.diagnosis.message)  # the wording, for the record (pytest -s)
    return result.diagnosis


def test_a_70b_model_on_one_24_gb_gpu_fits_no_length_but_four_gpus(monkeypatch):
    facts = ModelFacts("hub", {**LLAMA_70B, "quantization_config": AWQ},
                       {"model.safetensors": 39_800_000_000})  # fmt: skip
    found = answer(monkeypatch, facts, ["--max-model-len", "8192"], one_gpu())
    assert found.rule == "cuda-oom"
    measured = "The weights need 37.07 GiB per device but vLLM may use 21.69 GiB of each"
    assert measured in found.cause
    assert "MAX_MODEL_LEN=" not in found.cause  # no length fits on this GPU
    tp = "The model would fit with TENSOR_PARALLEL_SIZE=4 ("
    held = re.search(r"=4 \((\d+) tokens of KV cache; (\d+) with KV_CACHE_DTYPE=fp8\)", found.cause)
    assert held is not None  # an fp8 cache halves the bytes per token: twice the tokens
    assert int(held.group(2)) == 2 * int(held.group(1))
    assert "or a RunPod GPU of 48 GB, 48 GB PRO, 80 GB," in found.cause
    # order: the rule's cause, what was measured, what would fit, before launch; the fix
    assert found.cause.index(measured) < found.cause.index(tp) < found.cause.index(BEFORE)
    assert found.fix and found.message.endswith(found.fix)


def test_an_8b_model_at_128k_on_24_gb_fits_shorter_or_with_fp8_or_on_48_gb(monkeypatch):
    facts = ModelFacts("hub", LLAMA_8B, {"model.safetensors": 16_060_000_000},
                       {"BF16": 8_030_000_000})  # fmt: skip
    found = answer(monkeypatch, facts, [], one_gpu())
    assert found.rule == "kv-cache-too-small-for-max-len"
    # the fix gives the estimate's length (the conservative count's, 55,120, ignores the
    # activations); the added sentence does not repeat it
    fits = int(found.fix.split("Set MAX_MODEL_LEN to ")[1].split(" ")[0])
    assert 30_000 < fits < 55_120 and fits % 16 == 0
    assert "The model would fit with TENSOR_PARALLEL_SIZE=2 (" in found.cause
    fp8 = re.search(r"KV_CACHE_DTYPE=fp8 with MAX_MODEL_LEN=(\d+) or less \((\d+) tokens "
                    r"instead of (\d+)\)", found.cause)  # fmt: skip
    assert fp8 is not None
    longer, doubled, now = (int(n) for n in fp8.groups())
    assert longer == pytest.approx(2 * fits, rel=0.01) and doubled == 2 * now  # fp8 doubles it
    assert "or a RunPod GPU of 48 GB, 48 GB PRO, 80 GB," in found.cause
    assert "24 GB" not in found.cause.split("RunPod GPU of ")[1]


def test_a_model_that_fits_nowhere_in_the_table_says_so(monkeypatch):
    facts = ModelFacts("hub", LLAMA_405B, {"model.safetensors": 812_000_000_000},
                       {"BF16": 405_000_000_000})  # fmt: skip
    found = answer(monkeypatch, facts, ["--max-model-len", "8192"], one_gpu())
    assert found.rule == "cuda-oom"
    assert (
        "Nothing tried would fit it: no shorter MAX_MODEL_LEN, no TENSOR_PARALLEL_SIZE up to "
        f"8, no KV_CACHE_DTYPE=fp8 and no RunPod GPU up to 180 GB (B200). {BEFORE}"
    ) in found.cause


def test_a_fit_stays_silent_and_other_rules_get_no_sentence(monkeypatch):
    facts = ModelFacts("hub", LLAMA_8B, {"model.safetensors": 16_060_000_000},
                       {"BF16": 8_030_000_000})  # fmt: skip
    monkeypatch.setattr(run, "read_facts", lambda *_a, **_k: facts)
    # The fit is under test, not this machine's disk (16 GB of weights to download).
    monkeypatch.setattr(disk, "free_bytes", lambda _path: 1024 * GIB)
    settings = SimpleNamespace(model="org/m", vllm_args=["--model", "org/m",
                                                          "--max-model-len", "8192"])  # fmt: skip
    ok = run.run_preflight(settings, {"HF_HUB_OFFLINE": "1"}, pack=PACK, timeout=5,
                           sdk_checks=False, inventory=lambda: one_gpu())  # fmt: skip
    assert ok.diagnosis is None and "alternatives" not in (ok.plan or {})
    busy = Inventory(gpus=(Gpu(0, "NVIDIA A100", 80 * GIB, 30 * GIB, (8, 0)),))
    ok = run.run_preflight(settings, {"HF_HUB_OFFLINE": "1"}, pack=PACK, timeout=5,
                           sdk_checks=False, inventory=lambda: busy)  # fmt: skip
    assert ok.diagnosis is not None and ok.diagnosis.rule == "gpu-free-memory-below-utilization"
    assert "would fit" not in (ok.diagnosis.message or "")


TINY = {  # tests/support/tiny_model.py's config.json
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "float32",
    "head_dim": 64, "hidden_size": 128, "intermediate_size": 256,
    "max_position_embeddings": 2048, "num_attention_heads": 2, "num_hidden_layers": 2,
    "num_key_value_heads": 1, "vocab_size": 350,
}  # fmt: skip


def test_on_vllms_cpu_build_the_advice_is_the_length_vllm_serves(monkeypatch):
    """fixtures/vllm-0.32/kv-cache-below-max-len.log: the tiny model, 1,000,000 bytes of
    KV cache, vLLM's CPU build: "the estimated maximum model length is 768" (blocks of
    128 tokens, one held back), where counting blocks of 16 said 976."""
    facts = ModelFacts("local", TINY, {"model.safetensors": 1_000_000}, local=True)
    host = Inventory(host=HostMemory(16 * GIB, 12 * GIB), error="NVML unavailable")
    args = ["--dtype", "float32", "--max-model-len", "2048", "--kv-cache-memory-bytes",
            "1000000"]  # fmt: skip
    found = answer(monkeypatch, facts, args, host, build="cpu")
    log = (ROOT / "fixtures" / "vllm-0.32" / "kv-cache-below-max-len.log").read_text()
    vllm = classify_lines(log.splitlines(), PACK)
    assert (found.rule, found.fix) == (vllm.rule, vllm.fix)
    assert "Set MAX_MODEL_LEN to 768 or less" in found.fix
    assert "which holds 896 tokens" in found.cause  # 7 blocks of 128
    assert "RunPod GPU" not in found.cause
