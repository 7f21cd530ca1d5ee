"""Fit arithmetic and the NVML seam. No GPU exists where tests run: ``FakeNvml`` stands in
for the ``pynvml`` module (the one seam, worker.seams.gpus.read_gpus); everything else is real."""

from __future__ import annotations

from types import SimpleNamespace

from worker.modelinfo.facts import ModelFacts
from worker.preflight import fit
from worker.preflight.request import read_request
from worker.seams import gpus
from worker.seams.gpus import GIB, HostMemory, Inventory

LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
}


class FakeNvml:
    """Stand-in for pynvml with the GPUs given as (name, total GiB, free GiB, (major, minor))."""

    def __init__(self, devices, driver="550.54.15", cuda=12040, fail_init=False):
        self.devices, self.driver, self.cuda, self.fail_init = devices, driver, cuda, fail_init

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.driver.encode()

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.devices[index]

    def nvmlDeviceGetName(self, handle):
        return handle[0]

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=int(handle[1] * GIB), free=int(handle[2] * GIB))

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return handle[3]


def inventory(*devices) -> Inventory:
    found, driver, cuda, error = gpus.read_gpus(FakeNvml(list(devices)))
    return Inventory(gpus=found, driver=driver, cuda_driver=cuda, error=error)


def req(*args: str):
    return read_request(["--model", "m", *args], "m")


def facts(params: int, config=LLAMA_8B) -> ModelFacts:
    return ModelFacts("hub", config, {"model.safetensors": params * 2}, {"BF16": params})


def test_nvml_seam_reads_count_memory_capability_and_driver():
    inv = inventory(("NVIDIA A10G", 24, 23.5, (8, 6)), ("NVIDIA A10G", 24, 24, (8, 6)))
    assert inv.count == 2 and inv.driver == "550.54.15" and inv.cuda_driver == "12.4"
    assert inv.gpus[0].total_bytes == 24 * GIB and inv.min_capability == (8, 6)
    assert inv.to_dict()["gpus"][0] == {
        "index": 0,
        "name": "NVIDIA A10G",
        "total_gib": 24.0,
        "free_gib": 23.5,
        "capability": "8.6",
    }


def test_no_nvml_gives_an_empty_inventory_with_the_reason():
    found, driver, _cuda, error = gpus.read_gpus(FakeNvml([], fail_init=True))
    assert found == () and driver is None and "NVML unavailable" in error


def test_host_memory_is_read_here():
    host = gpus.read_host_memory()
    assert host is not None and host.total_bytes > host.available_bytes > 0


def test_8b_fits_one_24_gib_gpu_at_8k_but_not_at_its_full_length():
    inv = inventory(("NVIDIA L4", 24, 23.6, (8, 9)))
    model = facts(8_030_000_000)
    assert fit.check_fit(model, req("--max-model-len", "8192"), inv, "gpu", 8192) is None
    pred = fit.check_fit(model, req(), inv, "gpu", 131072)
    assert pred is not None and pred.rule == "kv-cache-too-small-for-max-len"
    # 32 layers x 8 KV heads x 128 x 2 x 2 bytes = 128 KiB per token
    assert pred.values["len"] == "131072" and pred.values["need"] == "16.00"
    assert 0 < int(pred.values["fit"]) < 131072 and int(pred.values["fit"]) % 16 == 0


def test_70b_cannot_fit_one_24_gib_gpu_but_fits_two_80_gib_gpus():
    model = facts(
        70_600_000_000,
        {**LLAMA_8B, "num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64},
    )
    one = inventory(("NVIDIA L4", 24, 23.6, (8, 9)))
    pred = fit.check_fit(model, req(), one, "gpu", 8192)
    assert pred is not None and pred.rule == "cuda-oom"  # weights beyond the whole GPU
    two = inventory(
        ("NVIDIA H100 80GB HBM3", 80, 79.2, (9, 0)), ("NVIDIA H100 80GB HBM3", 80, 79.2, (9, 0))
    )
    assert (
        fit.check_fit(
            model, req("--tensor-parallel-size", "2", "--max-model-len", "8192"), two, "gpu", 8192
        )
        is None
    )
    pred = fit.check_fit(model, req("--tensor-parallel-size", "4"), two, "gpu", 8192)
    assert pred is not None and pred.rule == "tensor-parallel-gpu-count"
    assert pred.values == {"ws": "4", "gpus": "2"}


def test_weights_between_the_budget_and_the_gpu_are_no_kv_memory():
    inv = inventory(("NVIDIA A10G", 24, 23.6, (8, 6)))
    pred = fit.check_fit(facts(12_500_000_000), req(), inv, "gpu", 4096)  # 23.3 GiB of 24
    assert pred is not None and pred.rule == "kv-cache-no-memory"


def test_free_memory_below_the_share_is_predicted_from_nvml():
    inv = inventory(("NVIDIA A100-SXM4-80GB", 80, 30, (8, 0)))
    pred = fit.check_fit(facts(1_000_000_000), req(), inv, "gpu", 4096)
    assert pred is not None and pred.rule == "gpu-free-memory-below-utilization"
    assert pred.values == {"free": "30.00", "total": "80.00", "util": "0.92", "want": "73.60"}


def test_compute_capability_7_5_inventory_feeds_the_dtype_check():
    from worker.preflight import checks

    inv = inventory(("Tesla T4", 15, 14.5, (7, 5)))
    assert inv.min_capability == (7, 5)
    assert checks.check_dtype(req("--dtype", "bfloat16"), inv.min_capability) is not None


def test_no_gpu_on_a_gpu_build_judges_nothing_but_cpu_build_uses_host_memory():
    inv = Inventory(host=HostMemory(16 * GIB, 12 * GIB), error="NVML unavailable")
    model = facts(70_600_000_000)
    assert fit.check_fit(model, req(), inv, "gpu", 4096) is None
    pred = fit.check_fit(model, req(), inv, "cpu", 4096)
    # Issue 22: weights beyond the whole host memory cannot even load: out of memory.
    assert pred is not None and pred.rule == "host-memory-exhausted"
    assert "host memory (16.0 GiB" in pred.detail
    # Within the host but above vLLM's share (0.92 x 16 GiB): no room for the KV cache.
    pred = fit.check_fit(facts(7_700_000_000), req(), inv, "cpu", 4096)  # 14.3 GiB
    assert pred is None or pred.rule.startswith("kv-cache")
    pred = fit.check_fit(facts(7_950_000_000), req(), inv, "cpu", 4096)  # 14.8 GiB
    assert pred is not None and pred.rule == "kv-cache-no-memory"


def test_weight_bytes_follow_the_dtype_vllm_computes_in():
    fp32 = ModelFacts("hub", {**LLAMA_8B, "torch_dtype": "float32"}, {"m.safetensors": 400}, None)
    assert fit.weight_bytes(fp32, req()) == 200  # auto: at most 2 bytes
    assert fit.weight_bytes(fp32, req("--dtype", "float32")) == 400
    counted = ModelFacts("hub", LLAMA_8B, {}, {"BF16": 100, "I8": 10})
    assert fit.weight_bytes(counted, req("--dtype", "float32")) == 410
    quantized = ModelFacts(
        "hub",
        {**LLAMA_8B, "quantization_config": {"quant_method": "awq"}},
        {"m.safetensors": 77, "m.bin": 500},
        {"I32": 1000},
    )
    assert fit.weight_bytes(quantized, req()) == 77


def test_kv_layouts_not_modelled_are_not_judged():
    for extra in ({"sliding_window": 4096}, {"kv_lora_rank": 512}, {"layer_types": ["a"]}):
        assert fit.kv_bytes_per_token({**LLAMA_8B, **extra}, req()) is None
    assert fit.kv_bytes_per_token(LLAMA_8B, req("--kv-cache-dtype", "fp8")) == 32 * 8 * 128 * 2
