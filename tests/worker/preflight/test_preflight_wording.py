"""One cause, one wording: what the pre-flight predicts reads as what the classifier says
about vLLM's real output for the same configuration (fixtures/vllm-0.32, recorded with
the tiny model these configs describe). Where the numbers agree (the model's positions,
a repo id) the cause and fix are the same text; where the pre-flight counts differently
(its KV estimate is an upper bound) the rule, category and state are the same."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub import constants

from diagnostics import classify_lines
from tests.support.hub_server import HubServer
from tests.support.packs import shipped_pack
from tests.support.vllm_env import ROOT
from worker.preflight import run_preflight

PACK = shipped_pack()
FIXTURES = ROOT / "fixtures" / "vllm-0.32"
TINY = {  # tests/support/tiny_model.py's config.json (the model the fixtures ran)
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "dtype": "float32",
    "head_dim": 64,
    "hidden_size": 128,
    "intermediate_size": 256,
    "max_position_embeddings": 2048,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 1,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "vocab_size": 350,
}
VARIANTS = {
    "ok": TINY,
    "unsupported-arch": {**TINY, "architectures": ["FrobForCausalLM"]},
    "custom-code": {
        **TINY,
        "model_type": "frob_llama",
        "auto_map": {"AutoConfig": "configuration_frob.FrobLlamaConfig"},
    },
}
# fixture -> (model variant, vLLM arguments of its recording, same text expected)
LOCAL_CASES = {
    "max-model-len-too-large": ("ok", ["--max-model-len", "8192"], True),
    "unsupported-arch": ("unsupported-arch", [], True),
    "custom-code-no-trust": ("custom-code", [], True),
    "kv-cache-too-small": (
        "ok",
        ["--max-model-len", "2048", "--kv-cache-memory-bytes", "4096"],
        True,
    ),
    "kv-cache-below-max-len": (
        "ok",
        ["--max-model-len", "2048", "--kv-cache-memory-bytes", "1000000"],
        False,
    ),
}


def from_log(name: str):
    lines = (FIXTURES / f"{name}.log").read_text(errors="replace").splitlines()
    return classify_lines(lines, PACK)


def write(root: Path, config: dict) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    (root / "model.safetensors").write_bytes(b"\x00" * 1024)
    return root


def predict(model: str, args: list[str], env: dict):
    settings = SimpleNamespace(
        model=model, vllm_args=["--model", model, "--dtype", "float32", *args]
    )
    return run_preflight(settings, env, pack=PACK, timeout=5, sdk_checks=False).diagnosis


def assert_same(pre, log, same_text: bool) -> None:
    assert pre is not None and log.failed
    assert (pre.rule, pre.category, pre.state) == (log.rule, log.category, log.state)
    if same_text:
        assert pre.fix == log.fix
        assert pre.cause.startswith(log.cause + " ")
    assert pre.cause.endswith("vLLM was not started.")


@pytest.mark.parametrize("fixture", sorted(LOCAL_CASES))
def test_local_prediction_reads_as_vllms_own_failure(tmp_path, fixture):
    variant, args, same_text = LOCAL_CASES[fixture]
    model = write(tmp_path / variant, VARIANTS[variant])
    pre = predict(str(model), args, {"HF_HUB_OFFLINE": "1"})
    assert_same(pre, from_log(fixture), same_text)


@pytest.mark.parametrize(
    ("fixture", "repo", "same_text"),
    [
        ("hub-gated", "tiny-org/gated-llama", True),
        ("hub-missing", "tiny-org/does-not-exist", False),
    ],
)
def test_hub_prediction_reads_as_vllms_own_failure(tmp_path, monkeypatch, fixture, repo, same_text):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    model = write(tmp_path / "ok", TINY)
    gated = "tiny-org/gated-llama"
    with HubServer({gated: model}, gated={gated}) as hub:
        pre = predict(repo, [], {"HF_ENDPOINT": hub.url})
        assert hub.weight_bytes_served == 0
    assert_same(pre, from_log(fixture), same_text)
