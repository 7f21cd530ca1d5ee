"""Classify a whole log read from a binary stream, fast and in bounded memory.

The stream is read in blocks; Hyperscan scans each block for every pattern of the
pack at once, and only the lines it hits (plus the two lines after each, which may
continue a wrapped message) go through normalisation and the classifier. Lines
that hold ANSI escape codes are always passed on, since colour codes can split a
pattern, and so are lines with a lone carriage return (normalising turns it into a
space). The result is the same as feeding every line to the classifier.

Memory is bounded and time linear whatever the input: a line longer than
``streams.MAX_LINE`` is read as pieces (as the worker reads vLLM's pipe), UTF-16/32
logs are decoded, CR-only logs use CR as line end (see :mod:`diagnostics.streams`).

RunPod's console exports list the newest line first; such a log is detected from
its first lines and read back to front, through a temporary file, whatever its size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from diagnostics.classifier import Classifier
from diagnostics.model import Diagnosis
from diagnostics.normalize import wrapped_line_starts
from diagnostics.rules import RulePack
from diagnostics.streams import Piece, blocks, decoded, reversed_lines

BLOCK_SIZE = 1024 * 1024
_DETECT_SIZE = 8 * 1024 * 1024  # how much of a console export the order check reads
_FOLLOWING = 2
_RUNPOD_CONSOLE = re.compile(rb"^[a-z0-9]{12,20}\[(?:info|error|warning|warn|debug)\]")
_REVERSED_HINTS = (b"worker exited with exit code", b"Traceback (most recent call last)")
# Lines the prefilter cannot judge on their raw bytes: colour codes, a lone CR.
_ALWAYS_PASSED = re.compile(rb"\x1b|\r(?!\n)")


class InputError(Exception):
    """Raised when an input cannot be classified (empty or binary)."""


def classify_stream(stream: BinaryIO, pack: RulePack, *, block_size: int = BLOCK_SIZE) -> Diagnosis:
    first, reader = decoded(stream.read(block_size), stream, block_size)
    if not first:
        raise InputError("empty input")
    if b"\x00" in first[:65536]:
        raise InputError("binary input (NUL bytes), not a text log")
    classifier = Classifier(pack)
    if _console_head(first) and len(first) < _DETECT_SIZE:
        # The order is judged on the first _DETECT_SIZE bytes, whatever the block size.
        first += reader.read(_DETECT_SIZE - len(first))
    if _looks_reversed(first):
        for lineno, line in reversed_lines(first, reader, block_size):
            # Evidence line numbers refer to the file as given.
            classifier.feed(line.decode("utf-8", "replace"), lineno)
        return classifier.diagnosis()
    for lineno, line in candidate_lines(blocks(first, reader, block_size), pack):
        classifier.feed(line, lineno)
    return classifier.diagnosis()


def _console_head(block: bytes) -> bool:
    """Whether the first lines look like a RunPod console export (either order)."""
    head = block[:65536].splitlines()[:50]
    if not head or not _RUNPOD_CONSOLE.match(head[0]):
        return False
    console = sum(1 for line in head if _RUNPOD_CONSOLE.match(line))
    return console * 2 >= len(head)


def _looks_reversed(block: bytes) -> bool:
    if not _console_head(block):
        return False
    head = block[:65536].splitlines()[:50]
    # Newest first: the final "worker exited" line or a traceback's last line on top.
    first_tb = block.find(b"Traceback (most recent call last)")
    first_exc = re.search(rb"\]\s*\w+(?:Error|Exception): ", block)
    return any(h in head[0] for h in _REVERSED_HINTS) or (
        first_exc is not None and (first_tb == -1 or first_exc.start() < first_tb)
    )


def candidate_lines(blocks, pack: RulePack) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line a pattern could match, in order.

    Each hit line is followed by the next ``_FOLLOWING`` lines, also across a block
    boundary, so the result does not depend on the block size. A :class:`Piece`
    block's last newline was added (it cut a long line) and is not counted.
    """
    lineno = 0  # lines before ``pos`` (all earlier blocks included)
    owed = 0  # lines still to send after the last hit (may run into the next block)
    for block in blocks:
        size = len(block)
        hits = _hit_line_starts(block, pack)
        pos = 0
        index = 0
        line_start = 0
        while True:
            if owed == 0:
                if index == len(hits):
                    break
                line_start = hits[index]
            if line_start >= size:
                break
            if index < len(hits) and hits[index] == line_start:
                index += 1
                owed = _FOLLOWING
            else:
                owed -= 1
            end = block.find(b"\n", line_start)
            end = size if end < 0 else end
            lineno += block.count(b"\n", pos, line_start)
            pos = line_start
            yield lineno + 1, block[line_start:end].decode("utf-8", "replace")
            line_start = end + 1
        lineno += block.count(b"\n", pos) - isinstance(block, Piece)


def _hit_line_starts(block: bytes, pack: RulePack) -> list[int]:
    """Sorted start offsets of the lines that hold a match, an escape or a lone CR."""
    starts: list[int] = []
    line_start, line_end = 0, -1  # the line last added, up to and including its newline

    def on_match(_id, _from, to, _flags, _context) -> None:
        nonlocal line_start, line_end
        # A match ending exactly at a newline belongs to the line before it.
        at = to - 1 if to else 0
        if line_start <= at <= line_end:
            return  # another match on the same line (patterns ending in .* give many)
        line_start = block.rfind(b"\n", 0, at) + 1
        line_end = block.find(b"\n", at)
        if line_end < 0:
            line_end = len(block)
        starts.append(line_start)

    pack.database.scan(block, match_event_handler=on_match)
    found = _ALWAYS_PASSED.search(block)
    while found is not None:
        starts.append(block.rfind(b"\n", 0, found.start()) + 1)
        nxt = block.find(b"\n", found.start())
        if nxt < 0:
            break
        found = _ALWAYS_PASSED.search(block, nxt)
    # A message hard-wrapped at a terminal's width may match only once joined.
    starts += wrapped_line_starts(block)
    return sorted(set(starts))
