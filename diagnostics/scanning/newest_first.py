"""Attempts pasted newest first ("latest run on top, the previous one below"): found by
the times their start lines show (:func:`diagnostics.formats.order.newest_first`), read
in the order they ran, so that the last attempt is the one that ran last
(:mod:`diagnostics.classify.attempts`). Only ``diagnose``'s, for a paste of at most
``REORDER_MAX`` bytes: vLLM's own output (the worker's pipe) runs in order."""

from __future__ import annotations

import itertools
from typing import BinaryIO, NamedTuple

from diagnostics.formats.order import newest_first
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.attemptseek import candidate_lines, is_attempt

REORDER_MAX = 1 << 20  # a paste of several tries by hand is far smaller


class Block(NamedTuple):
    """A run of lines as pasted: its first line's number (1-based) and how many lines."""

    first: int
    lines: int


def oldest_first(stream: BinaryIO, start: int, pack: RulePack) -> tuple[bytes, list[Block]] | None:
    """The text of ``stream`` (from ``start``) with its attempts in the order they ran,
    and its blocks as pasted in that order; None when it is not a paste of attempts
    newest first. What comes before the newest attempt (the user's words, its command)
    stays with it."""
    end = stream.seek(0, 2)
    if end - start > REORDER_MAX:
        return None
    stream.seek(start)
    data = stream.read(end - start)
    # the markers' lines by their heads first (cheap: most logs hold one start, or
    # several in order); confirmed only when they read newest first
    marks = candidate_lines(data, pack)
    if newest_first(marks) is None:
        return None
    starts = newest_first([(at, line) for at, line in marks if is_attempt(pack, line)])
    if starts is None:
        return None
    parts, blocks, first = [], [], 1
    for lo, hi in itertools.pairwise([0, *starts[1:], len(data)]):
        part = data[lo:hi]
        if not part.endswith(b"\n"):
            part += b"\n"  # (the last line; a line end adds no line)
        parts.append(part)
        blocks.append(Block(first, part.count(b"\n")))
        first += blocks[-1].lines
    return b"".join(reversed(parts)), blocks[::-1]


def as_pasted(diagnosis: Diagnosis, blocks: list[Block]) -> Diagnosis:
    """``diagnosis`` of the reordered text, its evidence's line numbered as pasted."""
    if diagnosis.evidence is None:
        return diagnosis
    line = diagnosis.evidence.line
    for block in blocks:
        if line <= block.lines:
            return diagnosis._replace(
                evidence=diagnosis.evidence._replace(line=block.first + line - 1)
            )
        line -= block.lines
    return diagnosis
