"""Every real fixture log: expected verdict (table) and the full diagnosis (snapshots)."""

from __future__ import annotations

import functools

import pytest

from diagnostics.command.render import to_text
from diagnostics.model import Category, State
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import FIXTURES, case_id, labelled
from tests.support.packs import shipped_pack

PACK = shipped_pack()
CASES = labelled()
# Logs added after they were scored blind (docs/diagnostics.md, "Held-out checks") that
# the classifier still reads otherwise than their label, with the reason. Their
# snapshots record what it says.
KNOWN_MISSES = {
    "bad_config/vllm-3329-load-format-safetensors-but-bin-only.log": "the one line, 'Cannot "
    "find any model weights with <dir>', reads as a folder without weights; the label "
    "blames the --load-format the user forced, which the log's config line shows",
    "model_requirement/qanything-128-v100-fastchat-dtype-check-truncated.log": "right "
    "category, transient: the paste stops at a frame of _check_if_gpu_supports_dtype "
    "without its raise line, so where it stops is not known to be where it was raised",
}


@functools.cache
def _diagnose(path):
    """The diagnosis of a fixture, once for its two tests (a frozen value)."""
    with path.open("rb") as stream:
        return classify_stream(stream, PACK)


@pytest.mark.parametrize(("path", "entry"), CASES, ids=[case_id(p) for p, _ in CASES])
def test_expected_state_and_category(path, entry):
    diagnosis = _diagnose(path)
    label = entry["category"]
    if entry["file"] in KNOWN_MISSES and path.parent.parent == FIXTURES / "corpus":
        pytest.xfail(KNOWN_MISSES[entry["file"]])
    if label == "ok":
        assert diagnosis.state is State.READY
        assert diagnosis.category is None
        return
    expected = Category(label)
    assert diagnosis.category is expected, diagnosis
    # The manifest's permanence where it gives one (evidence can make an oom transient),
    # else the category's; other has none (it follows the image or the host).
    permanent = entry["permanent"] if entry.get("permanent") is not None else expected.permanent
    if entry.get("permanent") is not None or expected is not Category.OTHER:
        assert diagnosis.state is (State.FAILED_PERMANENT if permanent else State.FAILED_TRANSIENT)
    assert diagnosis.failed
    if label in ("cuda_fault", "network"):
        assert diagnosis.permanent is False
    # The evidence is a line of the file, at the line number given.
    raw = path.read_text(encoding="utf-8", errors="replace").splitlines()
    assert diagnosis.evidence is not None
    assert 1 <= diagnosis.evidence.line <= len(raw)


@pytest.mark.parametrize(("path", "entry"), CASES, ids=[case_id(p) for p, _ in CASES])
def test_snapshot(path, entry, snapshot):
    """The Diagnosis value itself (syrupy writes a dataclass one field a line) and the
    text a person reads; the JSON form is render's job (tests/diagnostics/command/test_diag_cli.py)."""
    diagnosis = _diagnose(path)
    name = str(path.relative_to(FIXTURES))
    assert diagnosis == snapshot(name="diagnosis")
    assert to_text(diagnosis, name) == snapshot(name="text")


def test_there_are_fixtures_of_every_category():
    labels = {entry["category"] for _, entry in CASES}
    wanted = {str(c) for c in Category}
    assert wanted <= labels
