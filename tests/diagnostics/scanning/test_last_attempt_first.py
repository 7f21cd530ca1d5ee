"""A big log is first judged by its last attempt alone (`scan._last_attempt_alone`): a
crash loop captured whole is then read at its end, not in every block its repeated
failure lines make relevant. The verdict must be the one reading the whole log gives;
the size threshold is lowered here so that small logs take that path too."""

from __future__ import annotations

import io

import pytest

from diagnostics.scanning import scan
from tests.diagnostics.cases import FIXTURES
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
# Real logs of one start each, with the server's own start lines (attempt markers).
CORPUS = sorted((FIXTURES / "corpus").rglob("*.log")) + sorted(
    (FIXTURES / "vllm-0.32").rglob("*.log")
)
VERSION = "INFO 05-23 09:30:29 [api_server.py:1043] vLLM API server version 0.8.5.post1\n"
ARGS = "INFO 05-23 09:30:29 [api_server.py:1044] args: Namespace(model_tag='/m', port=8000)\n"
NCCL = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
HEADS = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).\n"
LOADING = "INFO 05-23 09:30:40 [loader.py:1] Loading weights took 3.2 GB\n"


def _verdict(data: bytes, threshold: int, monkeypatch) -> tuple:
    monkeypatch.setattr(scan, "LAST_ATTEMPT_FIRST_ABOVE", threshold)
    d = scan.classify_stream(io.BytesIO(data), PACK)
    return (d.rule, d.state, d.evidence.line if d.evidence else None, d.cause)


def _both(data: bytes, monkeypatch) -> tuple[tuple, tuple]:
    return _verdict(data, -1, monkeypatch), _verdict(data, 1 << 62, monkeypatch)


def test_every_real_log_repeated_is_judged_as_read_whole(monkeypatch):
    """Each real log three times over (a crash loop): the same verdict, the same
    evidence line, either way."""
    differ = []
    for path in tiers.sample(CORPUS, 3):  # (the quick run: every third one)
        first, whole = _both(path.read_bytes() * 3, monkeypatch)
        if first != whole:
            differ.append(f"{path.name}: {first} != {whole}")
    assert differ == []


def test_a_crash_loop_is_read_at_its_last_attempt(monkeypatch):
    attempt = VERSION + ARGS + LOADING + NCCL
    data = ("".join([attempt] * 50)).encode()
    monkeypatch.setattr(scan, "LAST_ATTEMPT_FIRST_ABOVE", -1)
    alone = scan._last_attempt_alone(io.BytesIO(data), 0, PACK, scan.BLOCK_SIZE)
    assert alone is not None and alone.rule == "nccl-failure"
    assert alone.evidence is not None and alone.evidence.line == 49 * 4 + 4
    first, whole = _both(data, monkeypatch)
    assert first[:2] == whole[:2] == ("nccl-failure", alone.state)


@pytest.mark.parametrize(
    "lines",
    [
        # a failure before vLLM's first start (a download step's) stands
        ["huggingface_hub.errors.GatedRepoError: 403 Client Error.\n"]
        + [VERSION, ARGS, LOADING, NCCL] * 4,
        # attempts that fail differently: the last one's own cause, as read whole
        [VERSION, ARGS, NCCL, VERSION, ARGS, NCCL, VERSION, ARGS, HEADS],
        # a last attempt cut short keeps the cause seen before
        [VERSION, ARGS, NCCL, VERSION, ARGS, NCCL, VERSION, ARGS, LOADING],
        # one start only
        [VERSION, ARGS, LOADING, NCCL],
    ],
    ids=["failure-before-first-start", "attempts-differ", "last-cut-short", "one-start"],
)
def test_a_log_that_is_not_one_failure_repeated_is_read_whole(lines, monkeypatch):
    data = "".join(lines).encode()
    monkeypatch.setattr(scan, "LAST_ATTEMPT_FIRST_ABOVE", -1)
    assert scan._last_attempt_alone(io.BytesIO(data), 0, PACK, scan.BLOCK_SIZE) is None
    first, whole = _both(data, monkeypatch)
    assert first == whole
