"""The answer to a failed start that vLLM itself reported as out of KV cache or memory
(worker/supervision/failure.py): when the start's estimate (``preflight.estimate``, kept
in the supervisor's ``start_info``) found the model not to fit, the JSON error object
gets ``alternatives`` and its message one sentence on what would fit; other failures, and
starts the estimate judged to fit, are answered as before."""

from __future__ import annotations

import json
from types import SimpleNamespace

from diagnostics import State, classify_lines
from tests.support.model_configs import LLAMA_70B
from tests.support.packs import shipped_pack
from tests.support.vllm_env import ROOT
from worker.modelinfo.facts import ModelFacts
from worker.preflight import plan
from worker.preflight.request import read_request
from worker.seams.gpus import GIB, Gpu, Inventory
from worker.supervision.failure import failure_answer
from worker.supervision.machine import WorkerState

PACK = shipped_pack()
AWQ_70B = {
    **LLAMA_70B,
    "torch_dtype": "float16",
    "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
}
A5000 = Inventory(gpus=(Gpu(0, "NVIDIA RTX A5000", int(23.58 * GIB), int(23.3 * GIB), (8, 6)),))


def estimate_of(config: dict, args: list[str], inv: Inventory = A5000) -> dict | None:
    """What the pre-flight states for this start (the supervisor keeps it as "estimate")."""
    facts = ModelFacts("hub", config, {"model.safetensors": 39_800_000_000})
    req = read_request(["--model", "m", *args], "m")
    return plan.plan(facts, req, inv, "gpu", 131072, vllm_version="0.32.0")


def supervisor(log: str, estimate: dict | None, state=WorkerState.FAILED_PERMANENT):
    lines = (ROOT / log).read_text(errors="replace").splitlines()
    diagnosis = classify_lines(lines, PACK)
    info = {"relaunches": [], **({"estimate": estimate} if estimate else {})}
    return SimpleNamespace(
        diagnosis=diagnosis, state=state, tail=lambda: lines[-3:], start_info=lambda: info
    )


OOM_LOG = "fixtures/corpus/oom/vllm-28143-v1-linear-weights-oom-wrong-gpu.log"
KV_LOG = "fixtures/vllm-0.32/kv-cache-below-max-len.log"


def error_of(answer: dict) -> dict:
    return json.loads(answer["error"])


def test_vllms_out_of_memory_is_answered_with_what_would_fit():
    estimate = estimate_of(AWQ_70B, ["--max-model-len", "8192"])
    assert estimate is not None and estimate["alternatives"]["smallest_tensor_parallel_size"] == 4
    before = error_of(failure_answer(supervisor(OOM_LOG, None)))
    error = error_of(failure_answer(supervisor(OOM_LOG, estimate)))
    print(error["message"])  # the wording, for the record (pytest -s)
    assert (error["type"], error["rule"], error["category"]) == (
        "startup_error",
        "cuda-oom-allocate",
        "oom",
    )
    assert error["message"].startswith(before["message"] + " The model would fit with ")
    assert (
        "TENSOR_PARALLEL_SIZE=4 (" in error["message"]
        and "a RunPod GPU of 48 GB" in error["message"]
    )
    found = error["alternatives"]
    assert found["smallest_tensor_parallel_size"] == 4 and found["largest_max_model_len"] is None
    assert "48 GB" in found["gpu_sizes_that_fit"] and "alternatives" not in before
    # a transient answer carries them too, beside the end of vLLM's output
    transient = error_of(
        failure_answer(supervisor(OOM_LOG, estimate, WorkerState.FAILED_TRANSIENT))
    )
    assert transient["type"] == "prestart_failed" and transient["alternatives"] == found


def test_a_kv_cache_failure_keeps_vllms_length_and_adds_the_rest():
    estimate = {"weights_gib": 1.0, "alternatives": {
        "max_model_len": 2048, "kv_tokens": 896, "largest_max_model_len": 768,
        "fp8_kv_tokens": 3840, "fp8_max_model_len": 2048, "gpu_sizes_that_fit": [],
        "platform": "cpu",
    }}  # fmt: skip
    error = error_of(failure_answer(supervisor(KV_LOG, estimate)))
    assert error["rule"] == "kv-cache-too-small-for-max-len"
    assert error["message"].endswith(
        "Set MAX_MODEL_LEN to 768 or less (vLLM's estimate of what fits), or raise "
        "GPU_MEMORY_UTILIZATION, or use more GPUs (TENSOR_PARALLEL_SIZE) or a larger GPU. "
        "The model would fit with KV_CACHE_DTYPE=fp8 (3840 tokens instead of 896)."
    )
    assert error["alternatives"]["largest_max_model_len"] == 768


def test_no_alternatives_when_the_estimate_fits_or_the_failure_is_another():
    four = Inventory(gpus=A5000.gpus * 4)
    fits = estimate_of(AWQ_70B, ["--max-model-len", "8192", "--tensor-parallel-size", "4"], four)
    assert fits is not None and "alternatives" not in fits
    error = error_of(failure_answer(supervisor(OOM_LOG, fits)))
    assert "alternatives" not in error and "would fit" not in error["message"]
    other = supervisor("fixtures/vllm-0.32/unsupported-arch.log", estimate_of(AWQ_70B, []))
    assert other.diagnosis.state is State.FAILED_PERMANENT
    error = error_of(failure_answer(other))
    assert "alternatives" not in error and "would fit" not in error["message"]


def test_the_pre_flights_answer_is_not_said_twice():
    estimate = estimate_of(AWQ_70B, ["--max-model-len", "8192"])
    sentence = plan.advice(estimate, "cuda-oom")
    assert sentence is not None
    said = supervisor(OOM_LOG, estimate)
    said.diagnosis = SimpleNamespace(
        message=f"Out of memory. {sentence} Found before launch.", category="oom", rule="cuda-oom"
    )
    error = error_of(failure_answer(said))
    assert error["message"].count(sentence) == 1 and error["alternatives"]
