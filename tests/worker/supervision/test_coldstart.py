"""worker.supervision.coldstart: time per phase, and vLLM's own timings read with the rule pack's
phase markers (real log lines from fixtures/corpus)."""

from __future__ import annotations

import pytest

from tests.support.packs import shipped_pack
from tests.support.vllm_env import ROOT
from worker.supervision.coldstart import TIMINGS, ColdStartClock, timing_markers

PACK = shipped_pack()
CORPUS = ROOT / "fixtures" / "corpus"


def _read(clock: ColdStartClock, fixture: str) -> ColdStartClock:
    for line in (CORPUS / fixture).read_text(encoding="utf-8", errors="replace").splitlines():
        clock.line(line)
    return clock


def test_the_pack_marks_each_timing_vllm_prints() -> None:
    captured = {name for regex in timing_markers(PACK) for name in regex.groupindex}
    assert captured >= TIMINGS


def test_compile_and_capture_seconds_add_up() -> None:
    # torch.compile took 11.84 s; graph capturing finished in 4 secs.
    clock = _read(
        ColdStartClock(0.0, timing_markers(PACK)),
        "ok/autoscientists-v026-a100-qwen3-coder-30b-moe-ok.log",
    )
    assert clock.compile_s == pytest.approx(15.84)
    assert clock.reported_download_s is None


def test_vllms_download_time_counts_when_longer_than_the_phase() -> None:
    # Time spent downloading weights: 2389.512425 seconds (two torch.compile runs: 29.18 + 6.06 s).
    log = "kv_cache/dgx-spark-local-llm-laguna-int4-v0251-gb10-262k-kv-needed.log"
    clock = _read(ColdStartClock(0.0, timing_markers(PACK)), log)
    assert clock.compile_s == pytest.approx(35.24)
    clock.enter("downloading", 10.0)
    clock.enter("loading", 20.0)
    summary = clock.summary(50.0)
    assert summary == {
        "download_s": 2389.51,
        "load_s": 30.0,
        "compile_capture_s": 35.24,
        "total_s": 50.0,
    }


def test_phases_add_up_across_returns() -> None:
    clock = ColdStartClock(100.0)
    assert clock.enter("downloading", 101.0) == 1.0
    assert clock.enter("loading", 104.0) == 3.0
    assert clock.enter("downloading", 105.0) == 1.0
    assert clock.summary(107.0) == {
        "download_s": 5.0,
        "load_s": 1.0,
        "compile_capture_s": 0.0,
        "total_s": 7.0,
    }


def test_without_markers_no_line_changes_anything() -> None:
    clock = _read(ColdStartClock(0.0), "ok/autoscientists-v026-a100-qwen3-coder-30b-moe-ok.log")
    assert (clock.compile_s, clock.reported_download_s) == (0.0, None)
