"""The held-out scorer's labels (diagnostics.command.accuracy): a start under way whose
phase the writer did not name is right in any phase before ready, and only there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnostics.command.accuracy import score
from tests.support.packs import shipped_pack

LOADING = "INFO 02-11 19:03:41 llm_engine.py:234] Initializing an LLM engine (v0.7.2) with config"
READY = "INFO:     Application startup complete."
FAILED = "ValueError: Unknown quantization method: x. Must be one of ['awq']."


def _scored(tmp_path: Path, lines: list[str], **label: object):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text("\n".join(lines) + "\n")
    entry = {"file": "logs/a.log", "permanent": None, **label}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(entry) + "\n")
    (result,) = score(tmp_path, shipped_pack())
    return result


@pytest.mark.parametrize(
    ("lines", "right"),
    [([LOADING], True), ([LOADING, READY], False), ([LOADING, FAILED], False)],
    ids=["under-way", "ready", "failed"],
)
def test_ok_with_state_starting_is_right_only_before_ready(tmp_path, lines, right):
    result = _scored(tmp_path, lines, category="ok", state="starting")
    assert result.label == "under-way" and result.right is right
    assert result.failed_called_not_failed is False


def test_ok_without_a_state_must_be_ready(tmp_path):
    assert _scored(tmp_path, [LOADING], category="ok").right is False
    (tmp_path / "b").mkdir()
    assert _scored(tmp_path / "b", [LOADING, READY], category="ok").right is True


def test_scoring_in_several_processes_gives_each_log_its_verdict_in_the_manifests_order(tmp_path):
    logs = {"a": [LOADING], "b": [LOADING, READY], "c": [LOADING, FAILED]}
    logs |= {f"d{i}": [LOADING, FAILED] if i % 2 else [READY] for i in range(17)}
    (tmp_path / "logs").mkdir()
    manifest = []
    for name, lines in logs.items():
        (tmp_path / "logs" / f"{name}.log").write_text("\n".join(lines) + "\n")
        manifest.append(json.dumps({"file": f"logs/{name}.log", "category": "ok"}))
    (tmp_path / "manifest.jsonl").write_text("\n".join(manifest) + "\n")
    alone = score(tmp_path, shipped_pack())
    split = score(tmp_path, processes=2)
    assert [s.file for s in split] == [f"logs/{name}.log" for name in logs]
    assert [(s.file, s.diagnosis) for s in split] == [(s.file, s.diagnosis) for s in alone]
    assert len({s.predicted for s in split}) == 3  # under way, up, failed: each its own
    with pytest.raises(ValueError, match="shipped pack"):
        score(tmp_path, shipped_pack(), processes=2)
