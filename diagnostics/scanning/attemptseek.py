"""Where the last attempt of a log begins (:mod:`diagnostics.attempts.last`), found by
reading the file backwards: the last line on which vLLM's API server announces a start,
looked for in the last ``LOOK_BACK`` bytes (a crash loop's last attempt is near the end;
a log of one attempt with hours of requests after it is not read twice)."""

from __future__ import annotations

from functools import lru_cache, partial
from typing import BinaryIO

import hyperscan

from diagnostics.attempts.last import (
    attempt_markers,
    is_attempt_line,
    is_run_end,
    run_end_markers,
)
from diagnostics.formats.streams import MAX_LINE
from diagnostics.pack.matching import prefilter_form
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.blockdb import _database
from diagnostics.scanning.prefilter import prefilter_head
from diagnostics.scanning.readyseek import last_line

LOOK_BACK = 64 << 20
# How far back the last reports that a run ended are looked for: a failed run's start-up
# output is a few MiB at most, and only the last runs after the failure count.
RUN_LOOK_BACK = 4 << 20
_ANSWER_READ = 8 << 20  # how far an earlier attempt's failure is read to see it answered


@lru_cache(maxsize=8)
def _markers(pack: RulePack) -> hyperscan.Database | None:
    """The markers' heads (:func:`prefilter_head`: a marker ending in ``.*``, the logged
    arguments', reported one match per character; every line is confirmed whole)."""
    sources = [
        prefilter_head(prefilter_form(p.regex.pattern)).encode() for p in attempt_markers(pack)
    ]
    return _database(sources, hyperscan.HS_FLAG_ALLOWEMPTY) if sources else None


@lru_cache(maxsize=8)
def _run_ends(pack: RulePack) -> hyperscan.Database | None:
    """The heads of the reports that a run ended (as :func:`_markers`); keyed on the
    pack's key when it has one (reading the heads off the patterns costs more than
    loading the database)."""
    markers = run_end_markers(pack)
    if not markers:
        return None

    def heads() -> list[bytes]:
        return [prefilter_head(prefilter_form(rx.pattern)).encode() for rx in markers]

    if pack.key is None:
        return _database(heads(), hyperscan.HS_FLAG_ALLOWEMPTY)
    key = [b"run ends of pack " + pack.key.encode()]
    return _database(key, hyperscan.HS_FLAG_ALLOWEMPTY, expressions=heads)


def _is_run_end(pack: RulePack, line: bytes) -> bool:
    return len(line) <= MAX_LINE and is_run_end(line.decode("utf-8", "replace"), pack)


def last_run_ends(
    stream: BinaryIO, start: int, pack: RulePack, count: int, chunk: int = 1 << 20
) -> list[int]:
    """The offsets of the last ``count`` lines of ``stream`` (its text begins at
    ``start``) that report a run ended, in order, looked for in the last
    ``RUN_LOOK_BACK`` bytes."""
    database = _run_ends(pack)
    if database is None:
        return []
    end = stream.seek(0, 2)
    floor = max(start, end - RUN_LOOK_BACK)
    pos, carry, found, cut = end, b"", list[int](), False
    while pos > floor and len(found) < count:
        step = min(chunk, pos - floor)
        pos -= step
        stream.seek(pos)
        data = stream.read(step) + carry
        head = data.find(b"\n") + 1 if pos > start else 0
        if pos > start and not head:  # all of it one line's end, still going on
            carry, cut = (data, cut) if len(data) <= MAX_LINE else (b"\n", True)
            continue
        # the last line goes on in the blocks read before (``carry``), unless that was
        # longer than MAX_LINE (``cut``: not one of these reports, left out)
        hi = data.rfind(b"\n", 0, len(data) - 1) + 1 if cut else len(data)
        # the line cut at the block's start goes on in the block before it (still the
        # long one when no other line end came)
        whole = head < len(data)
        carry, cut = (data[:head], cut and not whole) if head <= MAX_LINE else (b"\n", True)
        while len(found) < count and head < hi:
            at = last_line(data, head, hi, database, partial(_is_run_end, pack))
            if at is None or at < 0:  # none left, or a line too long to be one
                break
            found.append(pos + at)
            hi = at
    return sorted(found)


def is_attempt(pack: RulePack, line: bytes) -> bool:
    """A raw line (at most MAX_LINE long) that marks a new attempt."""
    return len(line) <= MAX_LINE and is_attempt_line(line.decode("utf-8", "replace"), pack)


def _line_at(data: bytes, found: int) -> tuple[int, int]:
    """The start and the end (its line end, -1 when ``data`` ends first) of the line in
    which a match ending at ``found`` lies."""
    line_start = data.rfind(b"\n", 0, max(found - 1, 0)) + 1
    return line_start, data.find(b"\n", max(found - 1, line_start))


def _ends(database: hyperscan.Database, data: bytes) -> list[int]:
    """The end offsets of the markers' matches in ``data``."""
    ends: list[int] = []
    database.scan(data, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
    return ends


def last_attempt(stream: BinaryIO, start: int, pack: RulePack, chunk: int = 1 << 20) -> int | None:
    """The offset of the last attempt-marker line of ``stream`` (its text begins at
    ``start``), or None when the last ``LOOK_BACK`` bytes hold none."""
    database = _markers(pack)
    if database is None:
        return None
    end = stream.seek(0, 2)
    floor = max(start, end - LOOK_BACK)
    pos, carry = end, b""
    while pos > floor:
        step = min(chunk, pos - floor)
        pos -= step
        stream.seek(pos)
        data = stream.read(step) + carry
        head = data.find(b"\n") + 1 if pos > start else 0
        if pos > start and not head:
            carry = data if len(data) <= MAX_LINE + chunk else b""
            continue
        found = last_line(data, head, len(data), database, partial(is_attempt, pack))
        if found is not None:  # never -1: a line longer than MAX_LINE is not confirmed
            return pos + found
        carry = data[:head]
    return None


def attempt_before(
    stream: BinaryIO, start: int, pack: RulePack, line: int, chunk: int = 1 << 20
) -> bool:
    """Whether an attempt-marker line comes before the 1-based ``line`` of ``stream``:
    read forwards, stopping at the first marker, past ``line`` or after ``LOOK_BACK``
    bytes."""
    database = _markers(pack)
    if database is None:
        return False
    stream.seek(start)
    seen, carry, read, inside = 0, b"", 0, False  # lines before ``carry``; in a long line
    while read < LOOK_BACK:
        block = stream.read(chunk)
        read += len(block)
        data = carry + block
        cut = data.rfind(b"\n") + 1 if block else len(data)
        whole, carry = data[:cut], data[cut:]
        floor = whole.find(b"\n") + 1 if inside else 0  # the rest of a long line before it
        inside = len(carry) > MAX_LINE  # a line too long to be a marker: not kept
        if inside:
            carry = b""
        judged = -1  # the end of the last line judged (its other matches are passed over)
        for found in sorted(_ends(database, whole)):
            if found <= judged:
                continue
            line_start, line_end = _line_at(whole, found)
            judged = line_end if line_end >= 0 else len(whole)
            if line_start < floor:
                continue
            if seen + whole.count(b"\n", 0, line_start) + 1 >= line:
                return False
            if is_attempt(pack, whole[line_start : line_end if line_end >= 0 else len(whole)]):
                return True
        seen += whole.count(b"\n")
        if not block or seen + 1 >= line:
            return False
    return False


def attempt_starts(
    stream: BinaryIO, start: int, pack: RulePack, limit: int, count: int = 2
) -> list[int]:
    """The offsets where the first ``count`` attempts in the first ``limit`` bytes of
    ``stream`` (its text begins at ``start``) begin: an attempt-marker line not right
    after another (one start announces itself on consecutive lines: its version, its
    arguments). The bytes are read into memory: ``limit`` bounds them."""
    database = _markers(pack)
    if database is None:
        return []
    size = min(limit, 256 << 10)  # a crash loop's second attempt is near: read more only if not
    while True:
        begins = _attempt_starts(stream, start, pack, database, size, count)
        if len(begins) == count or size >= limit:
            return begins
        size = min(limit, size * 4)


def _attempt_starts(
    stream: BinaryIO,
    start: int,
    pack: RulePack,
    database: hyperscan.Database,
    size: int,
    count: int,
) -> list[int]:
    stream.seek(start)
    data = stream.read(size)
    begins: list[int] = []
    previous_end = -2
    for found in sorted(set(_ends(database, data))):
        line_start, line_end = _line_at(data, found)
        if line_end < 0:
            break  # the line goes on past what was read
        if line_start <= previous_end or not is_attempt(pack, data[line_start:line_end]):
            continue
        if line_start != previous_end + 1:
            if len(begins) == count:
                break
            begins.append(start + line_start)
        previous_end = line_end
    return begins


def candidate_lines(data: bytes, pack: RulePack) -> list[tuple[int, bytes]]:
    """The lines of ``data`` (whole lines, in memory) where an attempt marker's head
    matches, (offset, line) in order, not yet confirmed (:func:`is_attempt`)."""
    database = _markers(pack)
    if database is None:
        return []
    lines: list[tuple[int, bytes]] = []
    for found in sorted(set(_ends(database, data))):
        line_start, line_end = _line_at(data, found)
        if not lines or lines[-1][0] != line_start:
            lines.append((line_start, data[line_start : line_end if line_end >= 0 else len(data)]))
    return lines


def next_line(stream: BinaryIO, at: int) -> int:
    """The offset of the line after the one that begins at ``at``."""
    stream.seek(at)
    read = 0
    while block := stream.read(1 << 16):
        if (end := block.find(b"\n")) >= 0:
            return at + read + end + 1
        read += len(block)
    return at + read


def after_line(stream: BinaryIO, offset: int, count: int, limit: int) -> int | None:
    """Where the ``count``-th line from ``offset`` ends (after its line end), if before
    ``limit`` (at most ``_ANSWER_READ`` bytes on)."""
    stream.seek(offset)
    at, left = offset, count
    while left > 0 and at < min(limit, offset + _ANSWER_READ):
        block = stream.read(min(1 << 20, limit - at))
        if not block:
            return None
        found = -1
        for _ in range(min(left, block.count(b"\n"))):
            found = block.find(b"\n", found + 1)
            left -= 1
        if left == 0:
            return at + found + 1
        at += len(block)
    return None
