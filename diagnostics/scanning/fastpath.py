"""The block scanner behind ``diagnose``: classify a large log at close to grep speed.

None of these shortcuts changes a verdict; each feeds the classifier fewer lines.

1. **Start at the last ready marker.** A ready marker clears everything the
   classifier learned before it, so only the lines from the last one on can decide
   the verdict. :func:`restart_point` reads a file backwards with a tiny Hyperscan
   database (the ``ready`` patterns) and confirms a candidate line exactly as the
   classifier would; a failure after hours of logs costs one block. It backs up
   over lines cut at a terminal's width just before the marker (the classifier
   joins such a line with the next). The phase-marker captures the verdict shows
   (the vLLM version) and that only earlier lines hold are looked up backwards from
   there (:func:`context_before`). A stream that cannot seek is read from the start.
2. **Skip what cannot change the verdict.** Before a block is scanned line by line,
   one single-match scan of the block, its lines joined (so a match across a
   terminal's cut is seen too), says whether any pattern that could still change
   the verdict occurs in it: every pattern while no failure matched, else a ready
   marker, a better rule and what it depends on (:func:`relevant_ids`). A crash
   loop (the same failure over and over) and hours of request logs are skipped so;
   of such a block that ends in lines cut at a terminal's width only those lines are
   read (their message may go on in the next block).
   Inside a block that is read, hit lines that cannot matter are passed over, and
   the line after a hit is read only while the classifier wants it (evidence being
   collected, a cut line waiting for its rest); a block that starts with such lines
   is judged, after them, as a block of its own. Lines skipped are counted only when
   a later line is fed (a log that ends in skipped blocks is never counted); from
   then on, as each skipped block passes (its line ends counted while it is joined
   for the scan, not read again).
3. **Few match events.** Hyperscan reports every end offset of a match, so a pattern
   ending in ``.*`` reports once per character after its prefix (millions of Python
   callbacks on a big log). The block database holds each pattern without its
   trailing any-length or optional part (:func:`prefilter_head`): a line the pattern
   matches holds a match of the head, and the head reports a few events per line.
4. **Only the patterns that matter, in a big log.** After ``NARROW_AFTER`` bytes read
   line by line (a crash loop pasted without the server's start lines: every block
   holds lines of a better-ranked rule that lost, or a match across its joined lines),
   a block's hit lines come from a database of only the patterns that can still change
   the verdict (:func:`diagnostics.scanning.blockdb.narrowed`); when the verdict's
   standing widens inside such a block (the engine's end forgets a warning), the rest
   of the block is looked at again with every pattern. A line met again is matched
   once (:mod:`diagnostics.classify.linereading`).

Colour codes and carriage returns are cleaned only where an ESC, a CR or a colour
code that lost its ESC occurs. Compiled databases come from a disk cache
(:mod:`diagnostics.pack.dbcache`). Memory stays bounded (a block or two); time linear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import hyperscan

from diagnostics.classify.classifier import Classifier, stopping
from diagnostics.formats.streams import Piece
from diagnostics.model import State
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.blockdb import Scanner, Standing, narrowed, relevant_ids, scanner
from diagnostics.scanning.blocktext import _always_passed, _cleaned, _joined, _line_starts
from diagnostics.scanning.phasecontext import context_before, needed_context
from diagnostics.scanning.prefilter import prefilter_head
from diagnostics.scanning.readyseek import Plan, Restart, count_lines, plan, restart_point
from diagnostics.scanning.skipping import _quiet_lines

# The passes and helpers live in their own modules; they stay importable from here.
__all__ = [
    "Plan",
    "Restart",
    "Scanner",
    "_cleaned",
    "_joined",
    "classify_blocks",
    "context_before",
    "count_lines",
    "needed_context",
    "plan",
    "prefilter_head",
    "relevant_ids",
    "restart_point",
    "scanner",
]


# -- pass 2: feed the classifier -------------------------------------------------------


def classify_blocks(
    blocks: Iterable[bytes],
    classifier: Classifier,
    first_line: int = 0,
    recount: Callable[[int, int], int] | None = None,
    stop: int | None = None,
    exits: bool = False,
) -> Classifier:
    """Feed ``classifier`` the lines of ``blocks`` that can change its verdict
    (numbered from ``first_line`` + 1), as feeding it every line would.

    ``recount(start, end)``: the line ends between two offsets of the input (from
    where ``blocks`` start); given, the lines of skipped blocks are counted only when
    a later line is fed, so a log that ends without another relevant line is never
    counted. ``stop``: an offset from which no line can change the verdict (see
    plan); reading ends there once the classifier wants no more lines. ``exits``: the
    plan found vLLM's program ended before the last ready marker (blockdb.relevant_ids)."""
    scan = scanner(classifier.pack)
    pack = classifier.pack
    lineno = first_line  # lines before ``pos`` (all earlier blocks included)
    follow = False  # the classifier wants the next line (it may be in the next block)
    offset = 0  # where this block starts in the input
    uncounted = -1  # where skipped blocks whose lines are not yet counted start
    # Count a skipped block's lines as it passes (else only when a later line is fed):
    # once a line was fed after skipped blocks, more will be (a crash loop's cut lines),
    # and counting a block in memory costs less than reading it again to count.
    eager = recount is None
    read = 0  # bytes of the blocks read line by line
    for block in blocks:
        size = len(block)
        piece = isinstance(block, Piece)
        start, offset = offset, offset + size - piece
        if stop is not None and start >= stop and not follow:
            break
        if follow:
            # The lines that go on from the last block, then the rest of the block is
            # judged as a block of its own (not read whole for their sake).
            at, lineno = _follow(block, classifier, lineno)
            follow = classifier.wants_next_line
            if at >= size:
                lineno -= piece if at > size - piece else 0
                continue
            block = Piece(block[at:]) if piece else block[at:]
            start, size = start + at, size - at
            if stop is not None and start >= stop:
                break
        lines = None if follow else _quiet_lines(block, scan, _standing(classifier, exits))
        quiet = lines is not None
        # Of a block in which nothing can change the verdict, only the lines cut at a
        # terminal's width that end it are read: the message they start may go on in the
        # next block (a crash loop's blocks end so one time in twenty).
        hits = _cut_lines(block, scan) if quiet else None
        if lines is not None and not hits:
            if eager:
                lineno += (lines if lines >= 0 else block.count(b"\n")) - piece
            elif uncounted < 0:
                uncounted = start
            continue
        if uncounted >= 0 and recount is not None:
            lineno += recount(uncounted, start)
            uncounted = -1
            eager = True
        narrowed_to: Standing = None  # the standing the block's hits were narrowed to
        if hits is None:
            standing = _standing(classifier, exits)
            database = narrowed(pack, standing) if read >= NARROW_AFTER else None
            hits = _hits(block, scan, database)
            narrowed_to = standing if database is not None else None
            read += size
        pos = 0
        line_start = 0
        index = 0
        while True:
            if not follow:
                # The next hit line that can change the verdict.
                while index < len(hits):
                    ids = hits[index][1]
                    standing = _standing(classifier, exits)
                    if (
                        standing is None
                        or ids is None
                        or not ids.isdisjoint(relevant_ids(pack, *standing))
                    ):
                        break
                    index += 1
                if index == len(hits):
                    break
                line_start = hits[index][0]
            if line_start >= size:
                break
            if index < len(hits) and hits[index][0] == line_start:
                index += 1
            lineno += block.count(b"\n", pos, line_start)
            pos = line_start
            end = _feed_line(block, line_start, classifier, lineno + 1)
            follow = classifier.wants_next_line
            if narrowed_to is not None and not _still_narrow(pack, classifier, narrowed_to):
                # what can change the verdict now is not all among what the hits were
                # narrowed to: the rest of the block's hits, of every pattern
                hits = [hit for hit in _hits(block, scan) if hit[0] > end]
                index, narrowed_to = 0, None
            line_start = end + 1
        lineno += block.count(b"\n", pos) - piece
    return classifier


# After this many bytes of blocks read line by line, a block's hit lines are found with
# the database of only the patterns that can still change the verdict (blockdb.narrowed,
# compiled once a standing, ~0.1 s, and cached): a crash loop pasted without the server's
# start lines, whose every block holds lines of a better-ranked rule (that lost to the
# verdict's) or a match across its joined lines, reported millions of matches of every
# head (210 MB: 8.5 of 16.6 s, 2026-12-04). A small log never pays the compilation.
NARROW_AFTER = 8 << 20


def _still_narrow(
    pack: RulePack, classifier: Classifier, narrowed_to: tuple[int, bool, bool, bool]
) -> bool:
    """Whether every pattern that can change the verdict now is among those that could
    at ``narrowed_to`` (hits found for that standing are then all the hits needed)."""
    now = _standing(classifier, exits=narrowed_to[2])
    if now == narrowed_to:
        return True
    return now is not None and relevant_ids(pack, *now) <= relevant_ids(pack, *narrowed_to)


def _follow(block: bytes, classifier: Classifier, lineno: int) -> tuple[int, int]:
    """Feed the lines of ``block`` from its start while the classifier wants the next
    line; where the first line not fed starts, and the lines before it."""
    at, size = 0, len(block)
    while at < size and classifier.wants_next_line:
        end = _feed_line(block, at, classifier, lineno + 1)
        lineno += end < size
        at = end + 1
    return at, lineno


def _feed_line(block: bytes, at: int, classifier: Classifier, number: int) -> int:
    """Feed the line of ``block`` that starts at ``at`` as line ``number``; where it ends
    (its line end, or the end of the block)."""
    end = block.find(b"\n", at)
    end = len(block) if end < 0 else end
    classifier.feed(block[at:end].decode("utf-8", "replace"), number)
    return end


def _standing(classifier: Classifier, exits: bool) -> Standing:
    rank = classifier.findings.settled
    ready = classifier.phase is State.READY
    return None if rank is None else (rank, ready, exits, stopping(classifier))


def _hits(
    block: bytes, scan: Scanner, database: hyperscan.Database | None = None
) -> list[tuple[int, frozenset[int] | None]]:
    """(line start, pattern ids) of every line a pattern may match, in order; ids is
    None for lines that must be read whatever the verdict so far (colour codes, a
    lone CR, a terminal-width line the classifier may join with the next).
    ``database``: heads of fewer patterns (their pack indexes), else every head's."""
    by_line: dict[int, set[int] | None] = {}
    current: set[int] | None = None
    line_start, line_end = 0, -1

    def on_match(pattern_id, _from, to, _flags, _context) -> None:
        nonlocal current, line_start, line_end
        at = to - 1 if to else 0
        if not line_start <= at <= line_end:
            line_start = block.rfind(b"\n", 0, at) + 1
            line_end = block.find(b"\n", at)
            if line_end < 0:
                line_end = len(block)
            current = by_line.setdefault(line_start, set())
        if current is not None:
            current.add(pattern_id)

    (scan.heads if database is None else database).scan(block, match_event_handler=on_match)
    for start in _line_starts(block, scan.shapes):
        by_line[start] = None
    if b"\x1b" in block or b"\r" in block:
        for start in _always_passed(block):
            by_line[start] = None
    return [
        (start, None if ids is None else frozenset(ids)) for start, ids in sorted(by_line.items())
    ]


def _cut_lines(block: bytes, scan: Scanner) -> list[tuple[int, frozenset[int] | None]]:
    """The run of lines cut at a terminal's width that ends ``block``, as hit lines to be
    read whatever the verdict (none when its last line is not cut): the message they
    start may go on in the next block (a paste with no final newline ends in a block of
    its own)."""
    starts: list[int] = []
    end = len(block) - 1  # the last byte of the line looked at (its line end, if any)
    while end >= 0:
        first = block.rfind(b"\n", 0, end) + 1
        if not _line_starts(block[first : end + 1], scan.shapes):
            break
        starts.append(first)
        end = first - 1
    return [(line, None) for line in reversed(starts)]
