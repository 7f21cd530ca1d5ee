"""The pre-flight's pure checks: config.json and the arguments against the vLLM snapshot."""

from __future__ import annotations

import pytest

from tests.support.model_configs import llama_config
from worker.preflight import checks
from worker.preflight.registry import load_registry
from worker.preflight.request import read_request

REG = load_registry()
LLAMA = llama_config(layers=32, hidden=4096, heads=32, kv_heads=8, max_position_embeddings=2048)


def req(*args: str, model: str = "org/m", config: dict | None = None):
    return read_request(["--model", model, *args], model, config)


def test_request_reads_last_value_human_ints_and_config_file():
    r = req(
        "--max-model-len",
        "4k",
        "--max-model-len=32K",
        "--tensor-parallel-size",
        "2",
        "--no-trust-remote-code",
        "--trust-remote-code",
        config={"dtype": "bfloat16"},
    )
    assert (r.max_model_len, r.tensor_parallel_size, r.trust_remote_code) == (32768, 2, True)
    assert r.dtype == "bfloat16" and r.gpu_memory_utilization == 0.92
    assert req("--max-model-len", "auto").max_model_len is None
    assert req("--max-model-len", "-1").max_model_len is None
    assert req("--dtype", "half", config={"dtype": "bfloat16"}).dtype == "half"


def test_registry_snapshot_knows_llama_and_not_frob():
    assert "LlamaForCausalLM" in REG.architectures and "llama" in REG.config_model_types
    assert "FrobForCausalLM" not in REG.architectures | REG.transformers_architectures


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (LLAMA, (2048, "max_position_embeddings")),
        ({"n_positions": 1024, "max_position_embeddings": 4096}, (1024, "n_positions")),
        (
            {"max_position_embeddings": 8192, "rope_scaling": {"type": "linear", "factor": 4.0}},
            (32768, "max_position_embeddings"),
        ),
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
            },
            (131072, "max_position_embeddings"),
        ),
        ({"max_position_embeddings": 4096, "rope_parameters": {"full": {"factor": 2}}}, None),
        ({"text_config": {"max_position_embeddings": 1000}}, (1000, "max_position_embeddings")),
        ({"hidden_size": 8}, None),
    ],
)
def test_derived_max_len_follows_vllm(config, expected):
    assert checks.derived_max_len(config) == expected


def test_max_model_len_above_positions_is_predicted_with_numbers():
    pred = checks.check_max_model_len(LLAMA, req("--max-model-len", "8192"), {})
    assert pred is not None and pred.rule == "max-model-len-above-model-limit"
    assert pred.values == {"requested": "8192", "limit": "2048"}
    assert checks.check_max_model_len(LLAMA, req("--max-model-len", "2048"), {}) is None
    allowed = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert checks.check_max_model_len(LLAMA, req("--max-model-len", "8192"), allowed) is None


def test_unsupported_architecture_only_when_nothing_can_load_it():
    frob = {**LLAMA, "architectures": ["FrobForCausalLM"]}
    pred = checks.check_architecture(frob, req(), REG)
    assert pred is not None and pred.values == {"arch": "FrobForCausalLM"}
    assert checks.check_architecture(LLAMA, req(), REG) is None
    # transformers knows it: vLLM's Transformers backend may load it
    some_hf = next(iter(REG.transformers_architectures - REG.architectures))
    assert checks.check_architecture({**LLAMA, "architectures": [some_hf]}, req(), REG) is None
    # the repo's own code may provide it
    custom = {**frob, "auto_map": {"AutoModelForCausalLM": "m.Frob"}}
    assert checks.check_architecture(custom, req(), REG) is None


def test_remote_code_needs_trust_unless_a_config_class_exists():
    custom = {**LLAMA, "model_type": "frob_llama", "auto_map": {"AutoConfig": "c.Frob"}}
    pred = checks.check_remote_code(custom, req(), REG)
    assert pred is not None and pred.rule == "remote-code-required"
    assert checks.check_remote_code(custom, req("--trust-remote-code"), REG) is None
    known = {**LLAMA, "auto_map": {"AutoConfig": "c.Frob"}}  # llama: loads without the code
    assert checks.check_remote_code(known, req(), REG) is None


def test_heads_quantization_and_dtype():
    assert checks.check_heads(LLAMA, req("--tensor-parallel-size", "3")).rule == (
        "tensor-parallel-gpu-count"
    )
    assert checks.check_heads(LLAMA, req("--tensor-parallel-size", "4")) is None
    awq = {**LLAMA, "quantization_config": {"quant_method": "awq"}}
    assert checks.check_quantization(awq, req("--quantization", "awq_marlin")) is None
    assert checks.check_quantization(awq, req("--quantization", "awq")) is None
    pred = checks.check_quantization(awq, req("--quantization", "gptq"))
    assert pred is not None and pred.values == {"a": "awq", "b": "gptq"}
    assert checks.check_dtype(req("--dtype", "bfloat16"), (7, 5)).rule == (
        "gpu-capability-requirement"
    )
    assert checks.check_dtype(req("--dtype", "bfloat16"), (8, 0)) is None
    assert checks.check_dtype(req("--dtype", "float16"), (7, 5)) is None
    assert checks.check_dtype(req("--dtype", "bfloat16"), None) is None
