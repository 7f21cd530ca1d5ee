"""Reading one catalogued template in a text (:mod:`diagnostics.pack.catalogue` finds
the candidates): whole, cut where the paste stops, or reworded after a long opening.
Pure; ``str.find`` and slicing only."""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
from typing import NamedTuple

from diagnostics.model import Category

MIN_CUT = 40  # fixed characters a cut message must show, from its start
MIN_REWORDED = 48  # ... and a reworded one before its wording leaves the template's
MAX_FIELD = 32  # characters a field's value runs to (more: the text is another message)
MIN_REWORDED_WORDS = 7


class Entry(NamedTuple):
    """One catalogued message."""

    template: str
    category: Category
    permanent: bool
    exception: str  # the type raised, or ``logger.error`` and the like
    file: str  # where it is raised, from the project's root (``vllm/config.py``)
    function: str
    pieces: tuple[str, ...]  # the fixed text between the fields


class Found(NamedTuple):
    """A catalogued message read in a text."""

    entry: Entry
    whole: bool  # every piece was read (else the text stops inside it)
    matched: int  # fixed characters read


def read_at(entry: Entry, anchor_piece: int, start: int, text: str) -> Found | None:
    """Read ``entry`` in ``text`` with its piece ``anchor_piece`` starting at ``start``."""
    pieces = entry.pieces
    if start < 0:
        return None
    # The pieces before the anchor (fields between): found backwards, whole.
    before = start
    for piece in reversed(pieces[:anchor_piece]):
        if not piece:
            continue
        at = text.rfind(piece, 0, before)
        if at < 0:
            return None
        before = at
    matched = sum(len(p) for p in pieces[:anchor_piece])
    pos = start
    for index in range(anchor_piece, len(pieces)):
        piece = pieces[index]
        if index == anchor_piece:
            at = pos if text.startswith(piece, pos) else -1
        else:
            at = text.find(piece, pos) if piece else pos
        if at < 0:
            return _cut(entry, text, pos, piece, matched, first=index == anchor_piece)
        matched += len(piece)
        pos = at + len(piece)
    return Found(entry, True, matched)


def _cut(entry: Entry, text: str, pos: int, piece: str, matched: int, first: bool) -> Found | None:
    """The text stops inside ``piece`` (or in the field before it)."""
    rest = text[pos:].rstrip()
    stop = piece.rstrip()
    if first:  # the anchor's own piece: the text must be its beginning
        shown = len(rest) if stop.startswith(rest) else 0
        field = ""
        if shown == 0:
            return _reworded(entry, rest, stop, matched)
    else:
        shown = next(
            (j for j in range(min(len(stop), len(rest)), 0, -1) if rest.endswith(stop[:j])), 0
        )
        field = rest[: len(rest) - shown]
    if shown == 0 and (
        not field or len(field) > MAX_FIELD or len(field.split()) > 3 or stop[:2] in field
    ):
        # Nothing continues it, or more than a value: a field does not run on that long,
        # and one holding the text that follows it is another message.
        return None
    if "\n" in field or matched + shown < MIN_CUT:
        return None
    return Found(entry, False, matched + shown)


def _reworded(entry: Entry, rest: str, stop: str, matched: int) -> Found | None:
    """The text leaves the anchor's piece after a long opening: another wording of the
    same message (a release or fork that changed its end, a word lost in a paste). Read
    only up to the last whole word both share, and only after :data:`MIN_REWORDED`
    fixed characters and :data:`MIN_REWORDED_WORDS` words (an opening that long names
    the message); a cut or whole reading of another template that shows more wins."""
    same = next(
        (i for i, (a, b) in enumerate(zip(rest, stop, strict=False)) if a != b),
        min(len(rest), len(stop)),
    )
    shared = rest[:same]
    if same < len(stop) and same < len(rest) and (rest[same - 1 : same].isalnum()):
        shared = shared[: shared.rfind(" ") + 1] if " " in shared else ""
    if matched + len(shared) < MIN_REWORDED or len(shared.split()) < MIN_REWORDED_WORDS:
        return None
    return Found(entry, False, matched + len(shared.rstrip()))
