"""`diagnose` (the file path: blocks, Hyperscan over each block) and the worker (the line
path: vLLM's pipe split into lines, each fed to the classifier) must give the same
diagnosis for the same output: on every fixture and on variants of it that change
only what sits between the messages (trailing newlines, CRLF, a lone CR inside lines,
where the blocks end)."""

from __future__ import annotations

import io
import itertools
import random
import zlib
from pathlib import Path

import pytest

from diagnostics.attempts.last import last_attempt_of_lines
from diagnostics.classify.classifier import Classifier, following, reached
from diagnostics.classify.serving import tail_of
from diagnostics.classify.unmatched import with_tail
from diagnostics.formats.order import looks_reversed
from diagnostics.formats.streams import LineSplitter, _is_json_log
from diagnostics.pack.rules import load_pack
from diagnostics.scanning.pasted import REORDER_MAX, oldest_first
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import FIXTURES
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
# A console export printed newest first is read backwards, attempts pasted newest first
# are read in the order they ran, and a container runtime's JSON lines are decoded, by
# diagnose only: vLLM's own output (the worker's pipe) is none of them.
# Of the reconstructed logs (not real: fixtures/reconstructed/README.md) a fixed number,
# for their shapes: the RECONSTRUCTED with the lowest CRC-32 of their names (a stable
# sample; the share falls as sets are added, so that the test's cost stays the same: one
# in eight had grown to 1,462 of 12,540 logs and 29 s by stop 45).
RECONSTRUCTED = 200


def _read_as_written(path: Path) -> bool:
    data = path.read_bytes()
    head = data[: 1 << 20]
    if looks_reversed(head) or _is_json_log(head):
        return False
    # attempts pasted newest first (a paste of at most REORDER_MAX): diagnose's too
    return len(data) > REORDER_MAX or oldest_first(data, PACK) is None


def _paths() -> list[Path]:
    # Only the sample's logs are read (every test process collects this list).
    logs = list(FIXTURES.rglob("*.log"))
    real = [p for p in logs if "reconstructed" not in p.parts and _read_as_written(p)]
    written = sorted(
        (p for p in logs if "reconstructed" in p.parts), key=lambda p: zlib.crc32(p.name.encode())
    )
    sample = list(itertools.islice(filter(_read_as_written, written), RECONSTRUCTED))
    return sorted([*real, *sample])


# (the quick run, tests/support/tiers.py: every fourth one)
LOGS = tiers.sample(_paths(), 6)
PIPE_READ = 65536  # what the worker reads from vLLM's pipe at a time


def line_path(data: bytes, chunk: int = PIPE_READ):
    """The worker's path: pipe chunks -> LineSplitter -> Classifier.feed; of a log of
    several attempts (which one worker's vLLM never prints), the last one's failure, as
    ``classify_lines`` and ``diagnose`` read it."""
    classifier = Classifier(PACK)
    splitter = LineSplitter()
    lines: list[str] = []
    for start in range(0, len(data), chunk):
        for line in splitter.feed(data[start : start + chunk]):
            lines.append(line.decode("utf-8", "replace"))
            classifier.feed(lines[-1])
    for line in splitter.close():
        lines.append(line.decode("utf-8", "replace"))
        classifier.feed(lines[-1])
    # a tail of a server at work (the worker asks the server), or a request's error in one
    tail = lambda: tail_of(lines)  # noqa: E731
    first = lambda: len(lines) - len(tail()) + 1  # noqa: E731
    verdict = with_tail(classifier.diagnosis(), tail, PACK, first_line=first)
    again = lambda some: Classifier(PACK).feed_all(some).diagnosis()  # noqa: E731
    after = lambda some: following(classifier).feed_all(some).diagnosis()  # noqa: E731
    reach = lambda some: reached(Classifier(PACK).feed_all(some))  # noqa: E731
    furthest = lambda some: Classifier(PACK).feed_all(some).furthest  # noqa: E731
    return last_attempt_of_lines(verdict, lines, PACK, again, after, reach, furthest)


def file_path(data: bytes, block_size: int = 1 << 20):
    return classify_stream(io.BytesIO(data), PACK, block_size=block_size)


def _lone_crs(data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(
        line.replace(b" ", b"\r", 1) if i % 3 == 0 else line for i, line in enumerate(lines)
    )


VARIANTS = {
    "as-recorded": lambda d: d,
    "trailing-newlines": lambda d: d + b"\n\n\n",
    "no-final-newline": lambda d: d.rstrip(b"\n"),
    "crlf": lambda d: d.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "lone-cr": _lone_crs,
    "blank-lines-between": lambda d: d.replace(b"\n", b"\n\n"),
}


def variants_of(index: int) -> list[str]:
    """The recording itself and two of the other variants, taken in turn along the
    sorted fixtures: each variant is walked on 2 fixtures in 5 (about 80), every pair of
    them on 1 fixture in 10. All five on every fixture cost seconds and found nothing more."""
    pairs = list(itertools.combinations(list(VARIANTS)[1:], 2))
    return ["as-recorded", *pairs[index % len(pairs)]]


@pytest.mark.parametrize(
    ("index", "path"), list(enumerate(LOGS)), ids=[str(p.relative_to(FIXTURES)) for p in LOGS]
)
def test_file_and_line_paths_agree(index, path):
    recorded = path.read_bytes()
    rng = random.Random(path.name)
    as_recorded = None
    for name in variants_of(index):
        data = VARIANTS[name](recorded)
        expected = line_path(data)
        as_recorded = as_recorded or expected
        assert file_path(data) == expected, name
        # Block boundaries anywhere, pipe reads of any size.
        block = rng.randrange(64, 8192)
        assert file_path(data, block_size=block) == expected, (name, block)
    # Pipe reads of any size (the split into lines does not depend on them).
    assert line_path(recorded, chunk=rng.randrange(1, 4096)) == as_recorded


def test_an_anchor_inside_an_alternation_matches_on_every_line(tmp_path):
    """The prefilter once kept a `$` inside an alternation, which Hyperscan (block mode,
    no multiline flag) only matched at the end of a 1 MiB block: one more blank line at
    the end of a file changed the verdict."""
    (tmp_path / "10-x.yaml").write_text(
        "rules:\n"
        "  - id: anchored\n"
        "    category: remote_code\n"
        "    permanent: true\n"
        "    patterns: ['(?:trust_remote_code=True$|needs custom code$)']\n"
        "    cause: custom code\n"
        "    fix: set TRUST_REMOTE_CODE\n"
    )
    pack = load_pack(tmp_path)
    for tail in (b"", b"\n", b"\n\n", b"\r\n", b"\nnext line\n"):
        data = b"INFO start\nERROR this model needs custom code" + tail
        assert classify_stream(io.BytesIO(data), pack).rule == "anchored", tail
