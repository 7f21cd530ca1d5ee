"""A big log's blocks are scanned, after ``fastpath.NARROW_AFTER`` bytes read line by line,
for the lines of only the patterns that can still change the verdict (a database of
their heads a standing, ``blockdb.narrowed``). The verdict must be the one every
pattern's database gives: on the real logs, with blocks small enough that most are
narrowed, and when the verdict's standing widens inside a narrowed block."""

from __future__ import annotations

import io
import random

import pytest

from diagnostics.attempts.lines import classify_lines
from diagnostics.scanning import fastpath
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import FIXTURES
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
REAL = sorted((FIXTURES / "corpus").rglob("*.log"))


@pytest.fixture
def narrow_at_once(monkeypatch):
    monkeypatch.setattr(fastpath, "NARROW_AFTER", 0)


def test_every_real_log_read_narrowed_is_judged_as_read_whole(narrow_at_once):
    rng = random.Random(45)
    for path in tiers.sample(REAL, 3):  # (the quick run: every third one)
        data = path.read_bytes()
        whole = classify_stream(io.BytesIO(data), PACK, block_size=len(data) + 1)
        block = rng.randrange(256, 4096)
        assert classify_stream(io.BytesIO(data), PACK, block_size=block) == whole, (path, block)


def test_a_standing_that_widens_inside_a_narrowed_block_reads_the_rest_of_it(narrow_at_once):
    """The first block settles a warning of the hub (rank 14: the narrowed hits of the
    next block hold only better rules and markers); in the next one the engine's end of
    initialisation forgets it, and then a failure of the same rank follows: found only
    if the block's later hits are looked for again with every pattern."""
    first = [
        "INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.6.0",
        "WARNING 01-01 00:00:01 [hub.py:1] We couldn't connect to 'https://huggingface.co' "
        "to load this file",
        *(f"INFO 01-01 00:00:0{n} [engine.py:1] retrying" for n in range(2, 6)),
    ]
    second = [
        "INFO 01-01 00:00:09 [core.py:1] init engine (profile, create kv cache, warmup "
        "model) took 5.00 seconds",
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not "
        "Found for url: https://huggingface.co/api/models/nobody/nothing.",
    ]
    head = "".join(line + "\n" for line in first)
    data = (head + "\n".join(second) + "\n").encode()
    expected = classify_lines([*first, *second], PACK)
    assert str(expected.category) == "model_not_found"
    assert classify_stream(io.BytesIO(data), PACK, block_size=len(head)) == expected
