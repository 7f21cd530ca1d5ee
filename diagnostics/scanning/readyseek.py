"""Where classification can start (shortcut 1 of :mod:`diagnostics.scanning.fastpath`): the
last ready marker, found by reading a file backwards, and the blocks at the end in
which nothing can change a verdict."""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
from collections.abc import Callable
from typing import BinaryIO, NamedTuple, cast

import hyperscan

from diagnostics.classify.normalize import normalize, wrapped_at_width
from diagnostics.classify.services import service_of
from diagnostics.formats.streams import MAX_LINE
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.blockdb import Scanner, _ids_in, scanner
from diagnostics.scanning.skipping import _nothing_relevant


def is_ready_line(line: bytes, scan: Scanner) -> bool:
    """Whether the classifier enters the ready phase on this raw line, whatever came
    before it: not a line under a compose service's name (another service's ready
    marker is not vLLM's: diagnostics.classify.services)."""
    raw = line.decode("utf-8", "replace")
    if service_of(raw) is not None:
        return False
    text = normalize(raw)
    ids = _ids_in(text.encode("utf-8", "surrogateescape"), scan.pack.line_database)
    return any(i in ids and scan.pack.patterns[i].regex.search(text) for i in scan.ready_indexes)


class Restart(NamedTuple):
    offset: int  # where to start reading (a line start)
    lines: int  # lines before it


class Plan(NamedTuple):
    """How to read a file: from where, and where reading may stop."""

    restart: Restart | None  # None: from the start
    quiet_from: int  # no line from here to the end can change any verdict
    left: bool = False  # vLLM's program ended before the last ready marker (see _left_before)


def restart_point(
    stream: BinaryIO, start: int, pack: RulePack, chunk: int = 1 << 20
) -> Restart | None:
    """Where classifying ``stream`` can begin with a fresh classifier (see plan)."""
    return plan(stream, start, pack, chunk).restart


def plan(stream: BinaryIO, start: int, pack: RulePack, chunk: int = 1 << 20) -> Plan:
    """Where classifying ``stream`` (seekable; its text begins at ``start``) can begin
    with a fresh classifier and give the verdict the whole input gives: the last line
    where the classifier enters the ready phase, or the first of the hard-wrapped
    lines just before it (restart None when there is no ready marker, or when it sits
    in a line longer than ``MAX_LINE``). Read backwards from the end, so a failure after
    a start costs one block. On the way, the blocks after it in which no pattern
    matches at all (hours of request logs) are found: reading can stop where they
    begin (``quiet_from``), as reading them again could not change the verdict.
    After ``_BUSY_LOOK_BACK`` bytes of lines that do match something without a ready
    marker (a crash loop), the search ends: reading from the start costs no more."""
    scan = scanner(pack)
    pos = stream.seek(0, 2)
    quiet_from = pos  # no line from here on can change a verdict (checked so far)
    quiet = True  # every region read so far was quiet
    busy = 0  # bytes read back since the last quiet region
    carry = b""  # the head of the chunk after this one: the end of a line begun here
    after = b""  # the first lines of the region after this one (joins reach into them)
    buffer = bytearray(min(chunk, max(pos - start, 0)))
    while pos > start:
        step = min(chunk, pos - start)
        pos -= step
        stream.seek(pos)
        data = memoryview(buffer)[:step]
        stream.readinto(data)  # type: ignore[attr-defined]  # binary files all have it
        head = buffer.find(b"\n", 0, step) + 1 if pos > start else 0
        if pos > start and not head:  # no line end: all of it continues a longer line
            carry = bytes(data) + carry
            quiet = False
            if len(carry) > MAX_LINE + chunk:
                return Plan(None, quiet_from)
            continue
        if quiet:
            quiet = _nothing_relevant(b"".join((data[head:], carry, after)), scan, None)
            if quiet:  # then no ready marker either
                quiet_from, after = pos + head, _first_lines(buffer, head, step, carry, after)
                carry = bytes(data[:head])
                continue
        busy += step
        if busy > _BUSY_LOOK_BACK:
            return Plan(None, quiet_from)
        # The last line (it ends in the next chunk), then the complete lines before it.
        tail = buffer.rfind(b"\n", 0, step) + 1
        last = bytes(data[tail:]) + carry
        found = _last_ready(last, 0, len(last), scan)
        if found is None:
            found = _last_ready(buffer, head, tail, scan)
        else:
            found = -1 if found < 0 else tail
        if found is not None:
            if found < 0:
                return Plan(None, quiet_from)
            restart, left = _restart_before(stream, start, pos + found, pack)
            return Plan(restart, quiet_from, left)
        carry = bytes(data[:head])
    return Plan(None, quiet_from)


_BUSY_LOOK_BACK = 64 << 20
_JOINED_LINES = 5  # the classifier joins up to 4 cut lines and the line after them


def _first_lines(buffer: bytearray, head: int, step: int, carry: bytes, after: bytes) -> bytes:
    """The first lines (as many as the classifier joins) of buffer[head:step], then
    ``carry`` and ``after`` (the text that follows it)."""
    end = head
    for _ in range(_JOINED_LINES):
        found = buffer.find(b"\n", end, step)
        if found < 0:
            text, end = bytes(buffer[head:step]) + carry + after, 0
            for _ in range(_JOINED_LINES):
                end = text.find(b"\n", end) + 1
                if not end:
                    return text
            return text[:end]
        end = found + 1
    return bytes(buffer[head:end])


def _last_ready(text: bytes | bytearray, lo: int, hi: int, scan: Scanner) -> int | None:
    """Start of the last line of text[lo:hi] (whole lines) on which the classifier
    enters ready (-1 when that line is longer than MAX_LINE)."""
    # Lines whose raw bytes hold a ready marker. One that only reads as a marker once
    # cleaned (colour codes inside the words) is missed: the restart is then at an
    # earlier marker, which gives the same verdict, only later.
    if scan.ready is None:
        return None
    return last_line(text, lo, hi, scan.ready, lambda line: is_ready_line(line, scan))


def last_line(
    text: bytes | bytearray,
    lo: int,
    hi: int,
    database: hyperscan.Database,
    confirm: Callable[[bytes], bool],
) -> int | None:
    """Start of the last line of text[lo:hi] (whole lines) that holds a match of
    ``database`` and that ``confirm`` accepts (-1 when that line is longer than
    MAX_LINE); None when there is none."""
    ends: list[int] = []
    region = cast(bytes, memoryview(text)[lo:hi])  # scanned in place
    database.scan(region, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
    checked = hi
    for end in sorted(ends, reverse=True):
        end += lo
        if end > checked:
            continue  # in a line already checked
        start = max(text.rfind(b"\n", lo, max(end - 1, lo)) + 1, lo)
        line_end = text.find(b"\n", max(end - 1, lo), hi)
        line = bytes(text[start : line_end if line_end >= 0 else hi])
        if confirm(line):
            return start if len(line) <= MAX_LINE else -1
        checked = start
    return None


_LOOK_BACK = 1 << 16
# How far before the last ready marker the end of vLLM's program is looked for (a
# traceback there makes the file read whole: the marker may be another program's).
_LEFT_LOOK_BACK = 1 << 20


def _restart_before(
    stream: BinaryIO, start: int, ready: int, pack: RulePack
) -> tuple[Restart | None, bool]:
    """The restart at the ready line at offset ``ready``: the first line of the run of
    hard-wrapped lines right before it (the classifier joins such a line with the
    next), and the number of lines before that. None when that run is longer than
    the look-back window, or when vLLM's program ended in the window before it (the
    marker is then another program's: ``Classifier.vllm_left``; then True, and the file
    is read with the lines that show it: blockdb.relevant_ids' ``exits``)."""
    window_start = max(start, ready - _LOOK_BACK)
    stream.seek(window_start)
    window = stream.read(ready - window_start)
    offset = len(window)  # the line before starts before this
    while offset > 0:
        line_start = window.rfind(b"\n", 0, offset - 1) + 1
        if line_start == 0 and window_start > start:
            return None, False  # the run may go on before the window
        if not wrapped_at_width(window[line_start : offset - 1].decode("utf-8", "replace")):
            break
        offset = line_start
    restart = window_start + offset
    look_from = max(start, restart - _LEFT_LOOK_BACK)
    if look_from < window_start:
        stream.seek(look_from)
        before = stream.read(restart - look_from)
    else:
        before = window[:offset]
    if _left_before(before, look_from > start, pack):
        return None, True
    return Restart(restart, count_lines(stream, start, restart)), False


def _left_before(window: bytes, cut: bool, pack: RulePack) -> bool:
    """Whether the lines of ``window`` (its first one cut when ``cut``) show vLLM's
    program ended by a traceback, with no new start of vLLM after it."""
    if b"Traceback (most recent call last)" not in window:
        return False
    from diagnostics.classify.classifier import Classifier  # (a window with a traceback)

    classifier = Classifier(pack)
    lines = window.split(b"\n")
    for line in lines[1 if cut else 0 :]:
        classifier.feed(line.decode("utf-8", "replace"))
    return classifier.vllm_left


def count_lines(stream: BinaryIO, start: int, end: int, chunk: int = 1 << 20) -> int:
    """Line ends between two offsets of ``stream``."""
    stream.seek(start)
    count, left = 0, end - start
    while left > 0:
        data = stream.read(min(chunk, left))
        if not data:
            break
        count += data.count(b"\n")
        left -= len(data)
    return count
