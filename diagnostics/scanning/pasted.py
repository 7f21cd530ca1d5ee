"""A paste read whole (at most ``REORDER_MAX`` bytes; ``diagnose``'s only: vLLM's own
output, the worker's pipe, runs in order and shows no settings after it):

- attempts pasted newest first ("latest run on top, the previous one below"), found by
  the times their start lines show (:func:`diagnostics.formats.order.newest_first`), are
  read in the order they ran, so that the last attempt is the one that ran last
  (:mod:`diagnostics.attempts.last`);
- a setting the paste shows after the failure (an environment dump, a compose file
  below the log) is the environment the start ran in: the log is read again knowing it
  (:func:`diagnostics.attempts.lines.settings_shown`);
- a failure the model's files can cause (no model in a local folder, weights missing
  or cut) after a step before vLLM's first start failed is what that step left
  (:func:`diagnostics.attempts.decisive.left_by_a_step`)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from typing import BinaryIO, NamedTuple

from diagnostics.attempts.decisive import left_by_a_step, may_be_left
from diagnostics.attempts.last import rerun_command
from diagnostics.attempts.lines import late_setting, settings_shown
from diagnostics.formats.order import newest_first
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.attemptseek import candidate_lines, is_attempt

REORDER_MAX = 1 << 20  # a paste of several tries by hand is far smaller


class Block(NamedTuple):
    """A run of lines as pasted: its first line's number (1-based) and how many lines."""

    first: int
    lines: int


def oldest_first(
    data: bytes, pack: RulePack, marks: list[tuple[int, bytes]] | None = None
) -> tuple[bytes, list[Block]] | None:
    """``data`` (a paste) with its attempts in the order they ran, and its blocks as
    pasted in that order; None when it is not a paste of attempts newest first. What
    comes before the newest attempt (the user's words, its command) stays with it; each
    older attempt begins at the prompt that ran it, if one of the lines just above its
    start is one. ``marks``: the paste's :func:`candidate_lines`, when known."""
    # the markers' lines by their heads first (cheap: most logs hold one start, or
    # several in order); confirmed only when they read newest first
    marks = candidate_lines(data, pack) if marks is None else marks
    if newest_first(marks) is None:
        return None
    starts = newest_first([(at, line) for at, line in marks if is_attempt(pack, line)])
    if starts is None:
        return None
    parts, blocks, first = [], [], 1
    cuts = [_with_its_prompt(data, at, pack) for at in starts[1:]]
    for lo, hi in itertools.pairwise([0, *cuts, len(data)]):
        part = data[lo:hi]
        if not part.endswith(b"\n"):
            part += b"\n"  # (the last line; a line end adds no line)
        parts.append(part)
        blocks.append(Block(first, part.count(b"\n")))
        first += blocks[-1].lines
    return b"".join(reversed(parts)), blocks[::-1]


_PROMPT_ABOVE = 3  # lines above an attempt's start where the prompt that ran it may be


def _with_its_prompt(data: bytes, at: int, pack: RulePack) -> int:
    """Where the attempt whose start line begins at ``at`` begins: at the shell prompt
    that ran it ("$ vllm serve ..."), one of the few lines above, else at ``at``."""
    begin = at
    for _ in range(_PROMPT_ABOVE):
        if begin == 0:
            break
        begin = data.rfind(b"\n", 0, begin - 1) + 1
        line = data[begin : data.find(b"\n", begin)].decode("utf-8", "replace")
        if rerun_command(line, pack) is not None:
            return begin
    return at


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


def read_whole(
    stream: BinaryIO,
    start: int,
    pack: RulePack,
    shown: frozenset[int],
    read: Callable[[], Diagnosis],
    classify: Callable[[BinaryIO, frozenset[int]], Diagnosis],
) -> Diagnosis:
    """The verdict of ``stream`` (its text from ``start``): ``read()``, the file's as it
    runs; or, of attempts pasted newest first, ``classify``'s of them reordered; or, of
    a setting shown after the failure, ``classify``'s knowing it (``shown``: the
    settings this reading already knows). A small paste is read into memory once."""
    end = stream.seek(0, 2)
    if end - start > REORDER_MAX:
        return read()
    stream.seek(start)
    data = stream.read(end - start)
    marks = candidate_lines(data, pack)
    ordered = oldest_first(data, pack, marks)
    if ordered is not None:
        reordered, pasted = ordered
        return as_pasted(classify(io.BytesIO(reordered), shown), pasted)
    verdict = read()
    if shown:
        return verdict
    if may_be_left(verdict, pack):
        begins = next((at for at, line in marks if is_attempt(pack, line)), None)
        if begins:  # (lines above the first start)
            above = lambda: classify(io.BytesIO(data[:begins]), shown)  # noqa: E731
            verdict = left_by_a_step(verdict, data.count(b"\n", 0, begins) + 1, above, pack)
    lines = (line for line in data.decode("utf-8", "replace").splitlines())
    late = settings_shown(verdict, pack, lines)
    return late_setting(verdict, late, pack, lambda: classify(io.BytesIO(data), late))
