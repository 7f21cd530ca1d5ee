"""A big log that is one text repeated is judged from three and four repetitions
(:mod:`diagnostics.scanning.repeats`): the verdict, evidence line included, must be the
one reading it whole gives. The size threshold is lowered here so that small logs take
that path too."""

from __future__ import annotations

import io

import pytest

from diagnostics.scanning import repeats, scan
from tests.diagnostics.cases import FIXTURES
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
REAL = sorted((FIXTURES / "corpus").rglob("*.log")) + sorted(
    (FIXTURES / "vllm-0.32").rglob("*.log")
)


def _verdict(data: bytes, threshold: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(scan, "REPEATED_ABOVE", threshold)
    return scan.classify_stream(io.BytesIO(data), PACK)


def test_every_real_log_repeated_is_judged_as_read_whole(monkeypatch):
    """Each real log nine times and a third of it (a paste repeated, cut anywhere): its
    evidence in an early repetition (the earliest cause) or in the last (a verdict read
    at the log's end) alike."""
    differ, judged, moved = [], 0, 0
    logs = tiers.sample(REAL, 3)  # (the quick run, tests/support/tiers.py: every third one)
    for path in logs:
        text = path.read_bytes()
        data = text * 9 + text[: len(text) // 3]
        judged += repeats.period(io.BytesIO(data), 0, len(data)) is not None
        few, whole = _verdict(data, -1, monkeypatch), _verdict(data, 1 << 62, monkeypatch)
        if few != whole:
            differ.append(f"{path.name}: {few} != {whole}")
        # the evidence placed past the four repetitions classified (it moved with the last)
        moved += few.evidence is not None and few.evidence.line > 4 * text.count(b"\n") + 1
    assert differ == []
    assert judged > len(logs) // 2  # most took the path
    assert moved > 0  # and some of them with the evidence in the last repetition


def test_a_repeated_log_with_another_end_is_read_whole():
    # its opening repeats itself (the same line 30 times) before the text does
    text = (
        b"INFO 01-01 00:00:00 [x.py:1] loading\n" * 30
        + b"".join(b"INFO 01-01 00:00:%02d [x.py:1] shard %d\n" % (n % 60, n) for n in range(200))
        + b"RuntimeError: CUDA error: boom\n"
    )
    data = text * 12
    assert repeats.period(io.BytesIO(data), 0, len(data)) == len(text)
    other = data + b"ValueError: something else\n"
    assert repeats.period(io.BytesIO(other), 0, len(other)) is None
