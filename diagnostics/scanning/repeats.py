"""A big log that is one text repeated (a paste or a crash loop captured over and over,
without the server's start lines that ``scan._last_attempt_alone`` reads attempts by),
judged from a few repetitions.

The log must be periodic to the byte: every byte equal to the one a period earlier,
from its first repetition to its end (a last repetition cut anywhere included). The
classifier is then given the text three times and four times, each followed by the
cut last repetition. When both verdicts are the same, that is the verdict (its
evidence in an early repetition); when they differ only in the evidence's line, by
exactly one repetition's lines, the evidence moves with the last repetition and is
placed in the whole log's. Anything else (a verdict that changes with the number of
repetitions) and the log is read whole. A log of requests after a start, or of
several different failures, is not periodic and is read whole at the cost of one
search for its opening."""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from diagnostics.model import Diagnosis

_HEAD = 4096  # the opening looked for again to find the period
_PERIOD_WITHIN = 8 << 20  # the longest period looked for
_CHUNK = 1 << 20
_CANDIDATES = 64  # places the opening recurs that are tried as the period
# At least this many repetitions: the logs classified instead (four at most) are then
# never judged this way themselves.
_AT_LEAST = 9


def period(stream: BinaryIO, start: int, end: int) -> int | None:
    """The smallest period of the bytes ``start`` to ``end`` (at most ``_PERIOD_WITHIN``,
    seen at least twice), or None when they are not one text repeated."""
    stream.seek(start)
    window = stream.read(min(end - start, _PERIOD_WITHIN + _HEAD))
    head = window[:_HEAD]
    if len(head) < _HEAD:
        return None
    # The opening recurs wherever the text repeats, and also inside a text whose opening
    # repeats itself (the same line a hundred times): each place it recurs is a
    # candidate, kept when the window read is periodic with it.
    found = window.find(head, 1)
    for _ in range(_CANDIDATES):
        if found < 0 or 2 * found > end - start:
            return None
        if _periodic(window, found):
            break
        found = window.find(head, found + 1)
    else:
        return None
    # The last chunk first: a log that is periodic but for its end (a different failure
    # appended) is told at once.
    chunks = range(start + found, end, _CHUNK)
    for at in (chunks[-1], *chunks[:-1]):
        stream.seek(at)
        later = stream.read(min(_CHUNK, end - at))
        stream.seek(at - found)
        if stream.read(len(later)) != later:
            return None
    return found


def _periodic(window: bytes, shift: int, piece: int = 1 << 16) -> bool:
    """Whether every byte of ``window`` equals the one ``shift`` before it (compared a
    piece at a time: the window is not copied whole)."""
    return all(
        window[at + shift : at + shift + piece] == window[at : min(at + piece, len(window) - shift)]
        for at in range(0, len(window) - shift, piece)
    )


def repeated_verdict(
    stream: BinaryIO, start: int, end: int, classify: Callable[[bytes], Diagnosis]
) -> Diagnosis | None:
    """The verdict of a log that is one text repeated, from three and four repetitions
    (``classify``: the verdict of a small log given whole); None to read it whole."""
    size = period(stream, start, end)
    if size is None:
        return None
    stream.seek(start)
    text = stream.read(size)
    copies = (end - start) // size
    stream.seek(start + copies * size)
    rest = stream.read(end - start - copies * size)
    if copies < _AT_LEAST:
        return None
    three, four = classify(text * 3 + rest), classify(text * 4 + rest)
    if three == four:
        return three
    if three.evidence is None or four.evidence is None:
        return None
    lines = text.count(b"\n")
    moved = four.evidence.line - three.evidence.line
    if moved != lines or three._replace(evidence=four.evidence) != four:
        return None
    line = four.evidence.line + (copies - 4) * lines
    return four._replace(evidence=four.evidence._replace(line=line))
