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


MIN_ENDING = MIN_REWORDED  # fixed characters a message that lost its start must show


def read_ending(entry: Entry, index: int, offset: int, at: int, text: str) -> Found | None:
    """Read ``entry`` in ``text`` from its ending's anchor (its piece ``index``, from
    ``offset``, found at ``at``) on to its end, whole, and back to where ``text``
    begins: inside the template (a line that lost its start: a screenshot cropped, a
    quote begun mid-line) after at least :data:`MIN_ENDING` fixed characters, or before
    it (the whole template)."""
    pieces = entry.pieces
    piece = pieces[index]
    if not text.startswith(piece[offset:], at):
        return None
    matched, pos = len(piece) - offset, at + len(piece) - offset
    for later in pieces[index + 1 :]:
        found = text.find(later, pos) if later else pos
        if found < 0:
            return None
        matched, pos = matched + len(later), found + len(later)
    # Back from the anchor: its own piece's opening, then the pieces before it (fields
    # between), until the text's beginning is inside one (or inside a field).
    head, stop = piece[:offset], at
    if text[:stop].endswith(head):
        matched, stop = matched + len(head), stop - len(head)
    else:
        return _begun_inside(entry, head, False, text[:stop], matched)
    for earlier in reversed(pieces[:index]):
        found = text.rfind(earlier, 0, stop) if earlier else stop
        if found < 0:
            return _begun_inside(entry, earlier, True, text[:stop], matched)
        matched, stop = matched + len(earlier), found
    return Found(entry, True, matched)


def _begun_inside(
    entry: Entry, piece: str, field_after: bool, opening: str, matched: int
) -> Found | None:
    """``opening`` (the text before what was read) is the end of ``piece``, followed by a
    field's value when ``field_after``: the text begins inside the template."""
    if not field_after:
        shown = len(opening) if piece.endswith(opening) else -1
    else:
        shown = next(
            (
                k
                for k in range(min(len(piece), len(opening)), -1, -1)
                if opening.startswith(piece[len(piece) - k :]) and _value(opening[k:])
            ),
            -1,
        )
    if shown < 0 or matched + shown < MIN_ENDING:
        return None
    return Found(entry, False, matched + shown)


def _value(text: str) -> bool:
    """Whether ``text`` may be a field's value (short, a few words, one line)."""
    return len(text) <= MAX_FIELD and len(text.split()) <= 3 and "\n" not in text
