"""Blocks of raw log bytes as the classifier reads their lines: colour codes and
carriage returns cleaned, lines joined across a terminal's cut, and the lines a
database matches (for :mod:`diagnostics.scanning.fastpath`)."""

from __future__ import annotations

import re
from functools import lru_cache

import hyperscan

from diagnostics.scanning.blockdb import _any_match, _database

_LONE_CR = re.compile(rb"\r(?!\n)")
_LOST_ESC_HINT = re.compile(rb"\[[0-9;]{1,12}m")  # fast: no look-behind
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")


# normalize's colour-code patterns, for bytes and kept inside one line; compiled on first
# use (a log with colour codes).
@lru_cache(maxsize=1)
def _ansi() -> re.Pattern[bytes]:
    return re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b")


@lru_cache(maxsize=1)
def _lost_esc() -> re.Pattern[bytes]:
    return re.compile(rb"(?<![\w\]])\[[0-9;]{1,12}m")


def _line_starts(block: bytes, database: hyperscan.Database | None) -> list[int]:
    """Sorted starts of the lines of ``block`` where ``database`` matches."""
    if database is None:
        return []
    starts: list[int] = []
    line_start, line_end = 0, -1

    def on_match(_id, _from, to, _flags, _context) -> None:
        nonlocal line_start, line_end
        at = to - 1 if to else 0
        if line_start <= at <= line_end:
            return
        line_start = block.rfind(b"\n", 0, at) + 1
        starts.append(line_start)
        line_end = block.find(b"\n", at)
        if line_end < 0:
            line_end = len(block)

    database.scan(block, match_event_handler=on_match)
    return sorted(set(starts))


def _always_passed(block: bytes) -> list[int]:
    """Starts of the lines holding a colour code or a lone CR (the raw bytes cannot
    tell what such a line matches once cleaned)."""
    starts = []
    at = block.find(b"\x1b")
    while at >= 0:
        starts.append(block.rfind(b"\n", 0, at) + 1)
        end = block.find(b"\n", at)
        at = block.find(b"\x1b", end) if end >= 0 else -1
    crs = block.count(b"\r")
    if crs and crs != block.count(b"\r\n"):
        found = _LONE_CR.search(block)
        while found is not None:
            starts.append(block.rfind(b"\n", 0, found.start()) + 1)
            end = block.find(b"\n", found.start())
            found = _LONE_CR.search(block, end) if end >= 0 else None
    return starts


def _cleaned(block: bytes) -> bytes:
    """``block`` as the classifier reads its lines: colour codes (also those that lost
    their ESC) removed; every line keeps its place and its line end."""
    if b"\x1b" in block:
        block = _ansi().sub(b"", block)
    if _any_match(block, _hint_database(), None):
        block = _lost_esc().sub(b"", block)
    return block


@lru_cache(maxsize=1)
def _hint_database() -> hyperscan.Database:
    """Finds a colour code that lost its ESC (twice as fast as the re search)."""
    return _database([_LOST_ESC_HINT.pattern], hyperscan.HS_FLAG_SINGLEMATCH)


def _text(block: bytes) -> bytes:
    """``block`` cleaned, every line in its place; CRs read as spaces (at a line end,
    where the classifier drops them, a space matches wherever nothing does)."""
    cleaned = _cleaned(block)
    return cleaned.translate(_CR_TO_SPACE) if b"\r" in cleaned else cleaned


def _joined(block: bytes) -> bytes:
    """``block`` with its lines joined without a break, CRs as the classifier reads
    them: dropped at a line end, spaces elsewhere (colour codes: see _cleaned)."""
    return _joined_counted(block)[0]


def _joined_counted(block: bytes) -> tuple[bytes, int]:
    """:func:`_joined`, and the number of line ends it removed (the block's)."""
    cleaned = _crs_read(block)
    joined = cleaned.replace(b"\n", b"")
    return joined, len(cleaned) - len(joined)


def _crs_read(block: bytes) -> bytes:
    """``block`` with its CRs as the classifier reads them: dropped at a line end,
    spaces elsewhere."""
    cleaned = block
    if b"\r" in cleaned:
        parts = cleaned.split(b"\r")
        if b"" not in parts[1:-1]:  # no CR follows another: one pass
            rest = [p if p[:1] == b"\n" else b" " + p for p in parts[1:]]
            return b"".join([parts[0], *rest])
        out = [parts[0]]
        index, count = 1, len(parts)
        while index < count:
            # A run of CRs ends before parts[end]: dropped at a line end, else spaces.
            end = index
            while end < count - 1 and not parts[end]:
                end += 1
            part = parts[end]
            at_line_end = not part or part[0] == 10  # 10: b"\n"
            out.append(b"" if at_line_end else b" " * (end - index + 1))
            out.append(part)
            index = end + 1
        cleaned = b"".join(out)
    return cleaned
