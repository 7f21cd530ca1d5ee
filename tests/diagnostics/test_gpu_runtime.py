"""The CUDA runtime's own words, as a real GPU printed them (fixtures/gpu/).

Each log in fixtures/gpu/logs/ is what torch 2.11, CuPy 14 or NCCL 2.28 printed when the
failure it is named for was made to happen on an NVIDIA H100 (scripts/gpu_faults.py, run
on the GPU machine lent to this work on 2026-12-06; fixtures/gpu/README.md). They are not
vLLM logs, but vLLM's output carries these lines verbatim when its start meets the same
fault, so each must be read as the fault it is, alone, without vLLM's lines around it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnostics.model import Category, State
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

GPU = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
PACK = shipped_pack()

# case -> (category, permanent or None where the log cannot say)
EXPECTED: dict[str, tuple[Category, bool | None]] = {
    # 200 GiB asked of a GPU of 79.18 GiB: no other process, no restart helps
    "oom_allocate": (Category.OOM, True),
    # the same allocator's words, with another process holding 30.51 GiB: the host's fault
    "oom_memory_held_elsewhere": (Category.OOM, False),
    # the process filled the GPU itself, then cuBLAS could not create its handle
    "oom_fill_then_matmul": (Category.OOM, True),
    # another process filled the GPU; the new one's context cannot be made. The bare
    # runtime error names no frame of CUDA's set-up, so whose memory it was is not in
    # the log: oom, permanence not asserted
    "oom_creating_a_context_on_a_full_gpu": (Category.OOM, None),
    "oom_cupy": (Category.OOM, True),
    # device faults: never permanent
    "illegal_address_torch": (Category.CUDA_FAULT, False),
    "illegal_address_cupy": (Category.CUDA_FAULT, False),
    "device_assert": (Category.CUDA_FAULT, False),
    "invalid_ordinal": (Category.CUDA_FAULT, False),
    "no_visible_gpu": (Category.CUDA_FAULT, False),
    "nccl_no_interface": (Category.CUDA_FAULT, False),
}


def _diagnose(name: str):
    with (GPU / "logs" / f"{name}.log").open("rb") as stream:
        return classify_stream(stream, PACK)


def test_every_recorded_log_has_an_expected_verdict():
    assert {p.stem for p in (GPU / "logs").glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_runtime_failure_is_read_as_its_fault(name):
    category, permanent = EXPECTED[name]
    diagnosis = _diagnose(name)
    assert diagnosis.category is category, diagnosis
    assert diagnosis.failed
    if permanent is not None:
        assert diagnosis.permanent is permanent
        assert diagnosis.state is (State.FAILED_PERMANENT if permanent else State.FAILED_TRANSIENT)


def test_the_allocators_numbers_reach_the_cause():
    alone = _diagnose("oom_allocate")
    assert "200.00 GiB" in (alone.cause or "") and "79.18 GiB" in (alone.cause or "")
    shared = _diagnose("oom_memory_held_elsewhere")
    assert "70.00 GiB" in (shared.cause or "") and "48.15 GiB" in (shared.cause or "")
    assert "other processes" in (shared.cause or "")


def test_the_record_is_what_the_logs_were_cut_from():
    record = json.loads((GPU / "faults.json").read_text())
    for name in EXPECTED:
        assert (GPU / "logs" / f"{name}.log").read_text() == record["cases"][name]["output"]
        assert record["cases"][name]["exit_code"] not in (0, None)
