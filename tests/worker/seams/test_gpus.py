"""Issue 23 §2 and §4: NVML under a deadline, and the GPUs CUDA_VISIBLE_DEVICES gives vLLM.

No GPU exists where these tests run: ``FakeNvml`` (tests/worker/preflight/test_preflight_fit.py)
stands in for the ``pynvml`` module, here with UUIDs and an ``nvmlInit`` that can hang
as a wedged driver's does. Everything else is the real seam and the real pre-flight."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from diagnostics import Category, State
from tests.support.packs import shipped_pack
from tests.worker.preflight.test_preflight_fit import LLAMA_8B, FakeNvml
from worker.modelinfo.facts import ModelFacts
from worker.preflight import run_preflight
from worker.seams import gpus
from worker.seams.gpus import GIB

PACK = shipped_pack()


class HangingNvml(FakeNvml):
    """nvmlInit never returns (until the test releases it): a wedged driver."""

    def __init__(self, devices=()):
        super().__init__(list(devices))
        self.release = threading.Event()

    def nvmlInit(self):
        self.release.wait(60)


class UuidNvml(FakeNvml):
    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-{handle[4]}".encode()


def in_thread(work, limit: float):
    """``work()`` run in a thread for at most ``limit`` s: (finished, result, seconds)."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(r=work()), daemon=True)
    began = time.monotonic()
    thread.start()
    thread.join(limit)
    return not thread.is_alive(), box.get("r"), time.monotonic() - began


def test_an_nvml_that_never_answers_is_cut_off_and_named():
    nvml = HangingNvml()
    try:
        done, inv, seconds = in_thread(lambda: gpus.read_inventory(nvml, deadline_s=0.3), 10)
    finally:
        nvml.release.set()
    assert done, "read_inventory waited for nvmlInit"
    assert seconds < 2
    assert inv.nvml_hung and inv.count == 0 and "did not answer within 0.3 s" in inv.error


def test_a_wedged_driver_is_a_transient_host_fault_of_the_preflight(tmp_path):
    # Before: the worker stayed in its first state for good (/ping 204, no answer).
    nvml = HangingNvml()
    settings = SimpleNamespace(
        model=str(tmp_path), vllm_args=["--model", str(tmp_path)], baked_model_path=None
    )
    try:
        done, result, _ = in_thread(
            lambda: run_preflight(
                settings,
                {},
                pack=PACK,
                sdk_checks=False,
                inventory=lambda: gpus.read_inventory(nvml, deadline_s=0.3),
            ),
            10,
        )
    finally:
        nvml.release.set()
    assert done
    d = result.diagnosis
    assert d is not None and d.state is State.FAILED_TRANSIENT
    assert d.category is Category.CUDA_FAULT and d.rule == "nvml-no-answer"
    assert "did not answer" in d.cause and "wedged" in d.cause


BUSY_FREE = [
    ("NVIDIA L4", 24, 2, (8, 9), "aaaa-0000"),  # GPU 0: another process holds it
    ("NVIDIA L4", 24, 23.6, (8, 9), "bbbb-1111"),  # GPU 1: free
]


def inventory_with(env, devices=BUSY_FREE):
    return gpus.read_inventory(UuidNvml(list(devices)), env=env)


def judge(env, devices=BUSY_FREE):
    from worker.preflight import fit
    from worker.preflight.request import read_request

    model = ModelFacts("hub", LLAMA_8B, {"model.safetensors": 2 * 10**9}, {"BF16": 10**9})
    req = read_request(["--model", "m", "--max-model-len", "4096"], "m")
    return fit.check_fit(model, req, inventory_with(env, devices), "gpu", 4096)


@pytest.mark.parametrize(
    "env",
    [
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111"},
        {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"},  # a unique prefix
        {"CUDA_VISIBLE_DEVICES": " 1 ", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    ],
)
def test_the_gpu_cuda_visible_devices_selects_is_the_one_judged(env):
    # Before: GPU 0 (busy) was judged and the start stopped as failed-transient.
    inv = inventory_with(env)
    assert [g.uuid for g in inv.gpus] == ["GPU-bbbb-1111"]
    assert judge(env) is None


def test_without_cuda_visible_devices_the_busy_first_gpu_is_judged():
    pred = judge({})
    assert pred is not None and pred.rule == "gpu-free-memory-below-utilization"
    assert judge({"CUDA_VISIBLE_DEVICES": "0,1"}) is not None


def test_cuda_stops_at_the_first_entry_it_cannot_read():
    assert [g.index for g in inventory_with({"CUDA_VISIBLE_DEVICES": "1,7,0"}).gpus] == [1]
    assert [g.index for g in inventory_with({"CUDA_VISIBLE_DEVICES": "1,0"}).gpus] == [1, 0]
    none = inventory_with({"CUDA_VISIBLE_DEVICES": ""})
    assert none.count == 0 and "leaves no GPU visible" in none.error
    none = inventory_with({"CUDA_VISIBLE_DEVICES": "-1"})
    assert none.count == 0


MIXED = [
    ("NVIDIA L4", 24, 2, (8, 9), "aaaa"),
    ("NVIDIA H100 80GB HBM3", 80, 79, (9, 0), "bbbb"),
]


def test_unknown_cuda_order_judges_no_gpu():
    # FASTEST_FIRST (CUDA's default) over GPUs of two kinds: index 0 may be either.
    inv = inventory_with({"CUDA_VISIBLE_DEVICES": "0"}, MIXED)
    assert inv.count == 0 and "CUDA_DEVICE_ORDER" in inv.error
    inv = inventory_with({"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, MIXED)
    assert [g.uuid for g in inv.gpus] == ["GPU-aaaa"]
    inv = inventory_with({"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, MIXED)  # UUIDs need no order
    assert [g.total_bytes for g in inv.gpus] == [80 * GIB]
    assert inventory_with({"CUDA_VISIBLE_DEVICES": "MIG-1234"}).count == 0
    assert inventory_with({"CUDA_VISIBLE_DEVICES": "1,1"}).count == 0


# What NVML and torch read on a real H100 80GB (fixtures/gpu/faults.json, the
# memory_overhead case: NVML's v1 and v2 memory queries and torch.cuda.mem_get_info in one
# process, CUDA 13.0, driver 580.159.04).
def _recorded_h100():
    import json
    from pathlib import Path

    record = json.loads(
        (Path(__file__).resolve().parents[3] / "fixtures/gpu/faults.json").read_text()
    )
    line = record["cases"]["memory_overhead"]["output"].split("MEMORY ", 1)[1]
    return json.loads(line.splitlines()[0])


class RecordedH100Nvml(UuidNvml):
    """Stands in for pynvml (no GPU here), answering with the real H100's numbers; with
    ``v2=False`` as a driver or library without NVML's v2 memory query does."""

    nvmlMemory_v2 = 0x02000028

    def __init__(self, v2=True):
        self.m, self.v2 = _recorded_h100(), v2
        super().__init__([("NVIDIA H100 80GB HBM3", 0, 0, (9, 0), "h100-0")])

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if version is None:
            return SimpleNamespace(**self.m["nvml_v1"])
        if not self.v2:
            raise RuntimeError("NVMLError_FunctionNotFound: Function Not Found")
        assert version == self.nvmlMemory_v2
        return SimpleNamespace(**self.m["nvml_v2"])


def test_a_gpus_total_is_the_one_cuda_and_so_vllm_budgets():
    # Before: NVML's plain total (79.65 GiB on an H100), 0.47 GiB more than CUDA's
    # (79.18 GiB, what vLLM multiplies by GPU_MEMORY_UTILIZATION): every budget and KV
    # figure of the pre-flight came out 0.42 GiB too large at 0.9.
    m = _recorded_h100()
    (gpu,) = gpus.read_inventory(RecordedH100Nvml(), env={}).gpus
    assert (gpu.total_bytes, gpu.free_bytes) == tuple(reversed(m["free_total"]))
    assert gpu.to_dict()["total_gib"] == 79.18  # vLLM's logs print 79.18-79.19 GiB
    (plain,) = gpus.read_inventory(RecordedH100Nvml(v2=False), env={}).gpus
    assert plain.total_bytes == m["nvml_v1"]["total"]  # an older driver: NVML's total


def test_memory_another_process_held_on_the_h100_stops_the_start_before_launch():
    # fixtures/gpu/faults.json "held": NVML's reading while another process held 30 GiB
    import json
    from pathlib import Path

    from worker.preflight import fit
    from worker.preflight.request import read_request

    held = json.loads(
        (Path(__file__).resolve().parents[3] / "fixtures/gpu/faults.json").read_text()
    )["held"]["inventory"]["gpus"][0]
    device = ("NVIDIA H100 80GB HBM3", held["total_gib"], held["free_gib"], (9, 0), "h")
    inv = gpus.read_inventory(UuidNvml([device]), env={})
    model = ModelFacts("hub", LLAMA_8B, {"model.safetensors": 16 * 10**9}, {"BF16": 8 * 10**9})
    req = read_request(["--model", "m", "--gpu-memory-utilization", "0.9"], "m")
    pred = fit.check_fit(model, req, inv, "gpu", 8192)
    assert pred is not None and pred.rule == "gpu-free-memory-below-utilization"
    # vLLM's own words at 0.9 would be "(48.15/79.18 GiB) ... (0.9, 71.26 GiB)": CUDA's
    # free memory is read after the process made its own context (518 MiB, torch's
    # message says); NVML's before launch, without it
    assert pred.values["free"] == "48.66" and pred.values["want"] == "71.26"
    low = read_request(["--model", "m", "--gpu-memory-utilization", "0.55"], "m")
    assert fit.check_fit(model, low, inv, "gpu", 8192) is None
