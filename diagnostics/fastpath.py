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
   loop (the same failure over and over) and hours of request logs are skipped so.
   Inside a block that is read, hit lines that cannot matter are passed over, and
   the line after a hit is read only while the classifier wants it (evidence being
   collected, a cut line waiting for its rest). Lines skipped are counted only when
   a later line is fed.
3. **Few match events.** Hyperscan reports every end offset of a match, so a pattern
   ending in ``.*`` reports once per character after its prefix (millions of Python
   callbacks on a big log). The block database holds each pattern without its
   trailing any-length or optional part (:func:`prefilter_head`): a line the pattern
   matches holds a match of the head, and the head reports a few events per line.

Colour codes and carriage returns are cleaned only where an ESC, a CR or a colour
code that lost its ESC occurs. Compiled databases come from a disk cache
(:mod:`diagnostics.dbcache`). Memory stays bounded (a block or two); time linear.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, cast

import hyperscan

from diagnostics import dbcache
from diagnostics.classifier import Classifier
from diagnostics.matching import prefilter_form
from diagnostics.model import State
from diagnostics.normalize import WRAP_WIDTHS, normalize, wrapped_at_width
from diagnostics.rules import RulePack, template_fields
from diagnostics.streams import MAX_LINE, Piece

_LONE_CR = re.compile(rb"\r(?!\n)")
# normalize's colour-code patterns, for bytes and kept inside one line.
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b")
_LOST_ESC = re.compile(rb"(?<![\w\]])\[[0-9;]{1,12}m")
_LOST_ESC_HINT = re.compile(rb"\[[0-9;]{1,12}m")  # fast: no look-behind
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")
_HINT_IN_DATABASE = 64  # up to this many patterns, the lost-ESC search joins their scan
# A quantified atom that can run over any text: what makes a match report per character.
_ANY_RUN = r"(?:\.|\\S|\\W|\\D|\[\^[^\]]*\])(?:[*+]|\{\d+,\d*\})"
_QUANTIFIER = r"[*+?]|\{\d*(?:,\d*)?\}"
_OPTIONAL = r"\{0?,\d*\}\??$"


# -- the prefilter form the block scan uses ------------------------------------------


def _elements(pattern: str) -> list[str] | None:
    """``pattern`` split into its top-level atoms (each with its quantifier), or None
    when it has a top-level alternation or a construct this splitter does not know."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        start, char = i, pattern[i]
        if char == "\\":
            if i + 1 >= n:
                return None
            if pattern[i + 1] in "xuUNpP" or pattern[i + 1].isdigit():
                return None  # multi-character escapes: not worth the risk
            i += 2
        elif char == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "[" and pattern.startswith("[:", i):
                    end = pattern.find(":]", i + 2)
                    if end < 0:
                        return None
                    i = end + 2
                    continue
                i += 2 if pattern[i] == "\\" else 1
            if i >= n:
                return None
            i += 1
        elif char == "(":
            depth, in_class = 0, False
            while i < n:
                c = pattern[i]
                if c == "\\":
                    i += 2
                    continue
                if in_class:
                    in_class = c != "]"
                elif c == "[":
                    in_class = True
                    if pattern.startswith("[^]", i) or pattern.startswith("[]", i):
                        i += 2 if pattern[i + 1] == "]" else 3
                        continue
                elif c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                i += 1
            else:
                return None
        elif char == "|":
            return None
        elif char in "*+?{)":
            return None  # a quantifier without an atom: leave the pattern alone
        else:
            i += 1
        quantifier = re.compile(_QUANTIFIER).match(pattern, i)
        if quantifier and not (pattern[i] == "{" and quantifier.group() == "{}"):
            i = quantifier.end()
            if i < n and pattern[i] in "?+":
                i += 1
        out.append(pattern[start:i])
    return out


def prefilter_head(pattern: str) -> str:
    """``pattern`` (a prefilter form: no anchors) without a trailing part that can run
    over any text or is optional. A line the pattern matches holds a match of the
    head, so the head prefilters as well; it reports a few match ends per line, not
    one per character."""
    elements = _elements(pattern)
    if elements is None or (elements and elements[0].startswith("(?") and len(elements) == 1):
        return pattern
    keep = len(elements)
    while keep > 1:
        last = elements[keep - 1]
        optional = last.endswith(("?", "*", "*?", "?+", "*+")) or bool(re.search(_OPTIONAL, last))
        if not (optional or re.search(_ANY_RUN, last)):
            break
        keep -= 1
    head = "".join(elements[:keep])
    if keep == len(elements) or not _safe_head(head):
        return pattern
    return head


def _safe_head(head: str) -> bool:
    """The head compiles and cannot match the empty string (that would hit every line)."""
    try:
        compiled = re.compile(head)
    except (re.error, RecursionError, OverflowError):
        return False
    return compiled.fullmatch("") is None and len(head) >= 3


# -- the pack's block databases --------------------------------------------------------


@dataclass(frozen=True)
class Scanner:
    """The Hyperscan databases the block scan uses for one pack."""

    pack: RulePack
    heads: hyperscan.Database  # every pattern's head (ids = pack.patterns indexes)
    shapes: hyperscan.Database  # lines of a terminal's width
    ready: hyperscan.Database | None  # the ready markers (None: the pack has none)
    ready_indexes: tuple[int, ...]  # pack.patterns indexes of the ready markers


# The cache key of a database built from heads names the patterns and this module
# (prefilter_head is code): computing every head costs more than reading the database.
_CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest().encode()


def _shape_expressions() -> list[bytes]:
    # A line of exactly one of the terminal widths (trailing CRs not counted).
    return [b"^[^\\n]{%d}[^\\n\\r]\\r*$" % (width - 1) for width in sorted(WRAP_WIDTHS)]


def _database(
    sources: list[bytes], flag: int, expressions: Callable[[], list[bytes]] | None = None
) -> hyperscan.Database:
    """A block-mode database, from the disk cache when it was compiled before.
    ``sources`` identify it (the expressions themselves unless ``expressions`` builds
    them from the sources)."""
    mode = hyperscan.HS_MODE_BLOCK
    parts = sources if expressions is None else [_CODE, *sources]
    key = dbcache.key(parts, range(len(parts)), [flag] * len(parts), mode)

    def build() -> hyperscan.Database:
        compiled = sources if expressions is None else expressions()
        db = hyperscan.Database(mode=mode)
        ids = list(range(len(compiled)))
        db.compile(expressions=compiled, ids=ids, elements=len(ids), flags=[flag] * len(ids))
        return db

    return dbcache.load_or_compile(key, mode, build)


def _sources(pack: RulePack, indexes: Iterable[int]) -> list[bytes]:
    return [pack.patterns[i].regex.pattern.encode() for i in indexes]


@lru_cache(maxsize=4)
def _heads(pack: RulePack) -> tuple[bytes, ...]:
    return tuple(prefilter_head(prefilter_form(p.regex.pattern)).encode() for p in pack.patterns)


@lru_cache(maxsize=4)
def scanner(pack: RulePack) -> Scanner:
    allow = hyperscan.HS_FLAG_ALLOWEMPTY
    everything = range(len(pack.patterns))
    ready_indexes = tuple(
        i
        for i, p in enumerate(pack.patterns)
        if p.kind == "phase" and pack.phases[p.owner].phase == "ready"
    )
    ready = [prefilter_form(pack.patterns[i].regex.pattern).encode() for i in ready_indexes]
    return Scanner(
        pack,
        _database(_sources(pack, everything), allow, lambda: list(_heads(pack))),
        _database(_shape_expressions(), hyperscan.HS_FLAG_MULTILINE),
        _database(ready, allow) if ready else None,
        ready_indexes,
    )


# What can still change a verdict: None while no failure matched (everything can),
# else the best rule's priority and whether vLLM is in the ready phase.
Standing = tuple[int, bool] | None


@lru_cache(maxsize=64)
def relevant_ids(pack: RulePack, best: int, ready: bool = False) -> frozenset[int]:
    """The pattern indexes that can still change a verdict whose best rule has
    priority ``best``: a ready marker (it clears the verdict), a better rule, the
    traceback header and frames a better rule needs, the stopping marker when a better
    rule is generic (the marker makes the classifier ignore generic rules), and, in
    the ready phase (``ready``), the markers that end it when a better rule counts only
    before ready."""
    better = [rule for rule in pack.rules if rule.priority < best]
    traceback_rules = any(rule.traceback_through for rule in better)
    generic = any(rule.generic for rule in better)
    leaves_ready = ready and any(rule.before_ready for rule in better)
    found = set()
    for index, pattern in enumerate(pack.patterns):
        if pattern.kind == "phase":
            phase = pack.phases[pattern.owner].phase
            keep = generic if phase == "stopping" else phase == "ready" or leaves_ready
        elif pattern.kind == "traceback":
            keep = traceback_rules
        else:  # rule, frame, after, traceback_body: owned by a rule (or past them all)
            keep = pattern.owner < best
        if keep:
            found.add(index)
    return frozenset(found)


# -- pass 1: where the classification starts -------------------------------------------


def is_ready_line(line: bytes, scan: Scanner) -> bool:
    """Whether the classifier enters the ready phase on this raw line."""
    text = normalize(line.decode("utf-8", "replace"))
    ids = _ids_in(text.encode("utf-8", "surrogateescape"), scan.pack.line_database)
    return any(i in ids and scan.pack.patterns[i].regex.search(text) for i in scan.ready_indexes)


@dataclass(frozen=True)
class Restart:
    offset: int  # where to start reading (a line start)
    lines: int  # lines before it


@dataclass(frozen=True)
class Plan:
    """How to read a file: from where, and where reading may stop."""

    restart: Restart | None  # None: from the start
    quiet_from: int  # no line from here to the end can change any verdict


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
            restart = None if found < 0 else _restart_before(stream, start, pos + found)
            return Plan(restart, quiet_from)
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
    ends: list[int] = []
    region = cast(bytes, memoryview(text)[lo:hi])  # scanned in place
    scan.ready.scan(region, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
    checked = hi
    for end in sorted(ends, reverse=True):
        end += lo
        if end > checked:
            continue  # in a line already checked
        start = max(text.rfind(b"\n", lo, max(end - 1, lo)) + 1, lo)
        line_end = text.find(b"\n", max(end - 1, lo), hi)
        line = bytes(text[start : line_end if line_end >= 0 else hi])
        if is_ready_line(line, scan):
            return start if len(line) <= MAX_LINE else -1
        checked = start
    return None


_LOOK_BACK = 1 << 16


def _restart_before(stream: BinaryIO, start: int, ready: int) -> Restart | None:
    """The restart at the ready line at offset ``ready``: the first line of the run of
    hard-wrapped lines right before it (the classifier joins such a line with the
    next), and the number of lines before that. None when that run is longer than
    the look-back window."""
    window_start = max(start, ready - _LOOK_BACK)
    stream.seek(window_start)
    window = stream.read(ready - window_start)
    offset = len(window)  # the line before starts before this
    while offset > 0:
        line_start = window.rfind(b"\n", 0, offset - 1) + 1
        if line_start == 0 and window_start > start:
            return None  # the run may go on before the window
        if not wrapped_at_width(window[line_start : offset - 1].decode("utf-8", "replace")):
            break
        offset = line_start
    restart = window_start + offset
    return Restart(restart, count_lines(stream, start, restart))


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


def needed_context(classifier: Classifier) -> set[str]:
    """The phase-marker captures (the version...) the verdict would show: the named
    fields of its best rule's messages and test that a phase marker captures. The
    classifier saw only part of the lines, so their last values are looked up."""
    rule = classifier.best_rule
    if rule is None:
        return set()
    names = template_fields(rule.cause) | template_fields(rule.fix)
    if rule.transient_if is not None:
        names |= set(rule.transient_if.names)
        names |= template_fields(rule.transient_if.cause) | template_fields(rule.transient_if.fix)
    captured = {n for p in classifier.pack.phases for rx in p.patterns for n in rx.groupindex}
    return names & captured


def context_before(
    stream: BinaryIO, start: int, end: int, pack: RulePack, names: set[str]
) -> dict[str, str]:
    """The last value of each of ``names`` that a phase marker between ``start`` and
    ``end`` captured, as the classifier remembers it (read backwards, stops once all
    are found)."""
    indexes = [
        i
        for i, p in enumerate(pack.patterns)
        if p.kind == "phase" and names & set(p.regex.groupindex)
    ]
    if not indexes:
        return {}
    database = _capture_database(pack, tuple(indexes))
    found: dict[str, str] = {}
    pos, carry = end, b""
    while pos > start and not names <= set(found):
        step = min(1 << 20, pos - start)
        pos -= step
        stream.seek(pos)
        data = stream.read(step) + carry
        if pos > start:
            cut = data.find(b"\n") + 1
            if not cut:  # a line longer than a block: carried whole, up to MAX_LINE
                if len(data) > MAX_LINE + (1 << 20):
                    break
                carry = data
                continue
            carry, data = data[:cut], data[cut:]
        candidates = _line_starts(data, database)
        if (b"\x1b" in data or b"\r" in data) and _line_starts(_text(data), database):
            candidates = sorted(set(candidates) | set(_always_passed(data)))
        for line_start in reversed(candidates):
            line_end = data.find(b"\n", line_start)
            line = data[line_start : line_end if line_end >= 0 else len(data)]
            for name, value in _phase_captures(line, pack).items():
                found.setdefault(name, value)
    return {name: value for name, value in found.items() if name in names}


@lru_cache(maxsize=8)
def _capture_database(pack: RulePack, indexes: tuple[int, ...]) -> hyperscan.Database:
    expressions = [prefilter_form(pack.patterns[i].regex.pattern).encode() for i in indexes]
    return _database(expressions, hyperscan.HS_FLAG_ALLOWEMPTY)


def _phase_captures(raw: bytes, pack: RulePack) -> dict[str, str]:
    """What the classifier's phase markers capture on this raw line (later wins)."""
    line = raw.decode("utf-8", "replace").rstrip("\r\n")
    text = normalize(line)
    captured: dict[str, str] = {}
    for index in sorted(_ids_in(text.encode("utf-8", "surrogateescape"), pack.line_database)):
        pattern = pack.patterns[index]
        if pattern.kind == "phase" and (match := pattern.regex.search(text)):
            captured.update({k: v for k, v in match.groupdict().items() if v})
    return captured


# -- pass 2: feed the classifier -------------------------------------------------------


def classify_blocks(
    blocks: Iterable[bytes],
    classifier: Classifier,
    first_line: int = 0,
    recount: Callable[[int, int], int] | None = None,
    stop: int | None = None,
) -> Classifier:
    """Feed ``classifier`` the lines of ``blocks`` that can change its verdict
    (numbered from ``first_line`` + 1), as feeding it every line would.

    ``recount(start, end)``: the line ends between two offsets of the input (from
    where ``blocks`` start); given, the lines of skipped blocks are counted only when
    a later line is fed, so a log that ends without another relevant line is never
    counted. ``stop``: an offset from which no line can change the verdict (see
    plan); reading ends there once the classifier wants no more lines."""
    scan = scanner(classifier.pack)
    pack = classifier.pack
    lineno = first_line  # lines before ``pos`` (all earlier blocks included)
    follow = False  # the classifier wants the next line (it may be in the next block)
    offset = 0  # where this block starts in the input
    uncounted = -1  # where skipped blocks whose lines are not yet counted start
    for block in blocks:
        size = len(block)
        piece = isinstance(block, Piece)
        start, offset = offset, offset + size - piece
        if stop is not None and start >= stop and not follow:
            break
        if not follow and _nothing_relevant(block, scan, _standing(classifier)):
            if recount is None:
                lineno += block.count(b"\n") - piece
            elif uncounted < 0:
                uncounted = start
            continue
        if uncounted >= 0 and recount is not None:
            lineno += recount(uncounted, start)
            uncounted = -1
        hits = _hits(block, scan)
        pos = 0
        line_start = 0
        index = 0
        while True:
            if not follow:
                # The next hit line that can change the verdict.
                while index < len(hits):
                    ids = hits[index][1]
                    standing = _standing(classifier)
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
            end = block.find(b"\n", line_start)
            end = size if end < 0 else end
            lineno += block.count(b"\n", pos, line_start)
            pos = line_start
            classifier.feed(block[line_start:end].decode("utf-8", "replace"), lineno + 1)
            follow = classifier.wants_next_line
            line_start = end + 1
        lineno += block.count(b"\n", pos) - piece
    return classifier


def _standing(classifier: Classifier) -> Standing:
    rule = classifier.best_rule
    return None if rule is None else (rule.priority, classifier.phase is State.READY)


def _hits(block: bytes, scan: Scanner) -> list[tuple[int, frozenset[int] | None]]:
    """(line start, pattern ids) of every line a pattern may match, in order; ids is
    None for lines that must be read whatever the verdict so far (colour codes, a
    lone CR, a terminal-width line the classifier may join with the next)."""
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

    scan.heads.scan(block, match_event_handler=on_match)
    for start in _line_starts(block, scan.shapes):
        by_line[start] = None
    if b"\x1b" in block or b"\r" in block:
        for start in _always_passed(block):
            by_line[start] = None
    return [
        (start, None if ids is None else frozenset(ids)) for start, ids in sorted(by_line.items())
    ]


def _cleaned(block: bytes) -> bytes:
    """``block`` as the classifier reads its lines: colour codes (also those that lost
    their ESC) removed; every line keeps its place and its line end."""
    if b"\x1b" in block:
        block = _ANSI.sub(b"", block)
    if _any_match(block, _hint_database(), None):
        block = _LOST_ESC.sub(b"", block)
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
    cleaned = block
    if b"\r" in cleaned:
        parts = cleaned.split(b"\r")
        if b"" not in parts[1:-1]:  # no CR follows another: one pass
            rest = [p if p[:1] == b"\n" else b" " + p for p in parts[1:]]
            return b"".join([parts[0], *rest]).replace(b"\n", b"")
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
    return cleaned.replace(b"\n", b"")


@lru_cache(maxsize=64)
def _presence(pack: RulePack, standing: Standing) -> tuple[hyperscan.Database, int | None] | None:
    """A single-match database of the heads of the patterns that can change a verdict
    standing so (None: every pattern), and the id of an extra
    entry that finds colour codes which lost their ESC (None when there is none: in a
    large database that entry slows every scan more than a search of its own costs);
    None when nothing can change the verdict."""
    ids = range(len(pack.patterns)) if standing is None else sorted(relevant_ids(pack, *standing))
    if not ids:
        return None
    flag = hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_SINGLEMATCH
    sources = _sources(pack, ids)
    if len(ids) > _HINT_IN_DATABASE:
        return _database(sources, flag, lambda: [_heads(pack)[i] for i in ids]), None
    sources.append(_LOST_ESC_HINT.pattern)
    database = _database(
        sources, flag, lambda: [*(_heads(pack)[i] for i in ids), _LOST_ESC_HINT.pattern]
    )
    return database, len(sources) - 1


def _nothing_relevant(block: bytes, scan: Scanner, standing: Standing) -> bool:
    """Whether no line of ``block`` can change a verdict standing so (None: no failure
    yet, every pattern counts); then the block is skipped
    unread. One scan of the block with its line ends removed says whether any such
    pattern occurs in it, on a line or across lines (as the classifier joins lines
    cut at a terminal's width); colour codes and carriage returns are cleaned first,
    as the classifier cleans each line."""
    presence = _presence(scan.pack, standing)
    if presence is None:
        return True
    database, hint = presence
    if hint is not None and b"\x1b" not in block:
        found = _any_match(_joined(block), database, hint)
        if found is not None:
            return not found
    # Colour codes (also some that lost their ESC): cleaned as the classifier does.
    return not _any_match(_joined(_cleaned(block)), database, None)


def _any_match(data: bytes, database: hyperscan.Database, hint: int | None) -> bool | None:
    """Whether an entry other than ``hint`` matches ``data``; None when only ``hint``
    (a lost colour code: the data must be cleaned first) does."""
    seen_hint = False

    def on_match(pattern_id, _from, _to, _flags, _context) -> bool:
        nonlocal seen_hint
        if pattern_id != hint:
            return True  # stop: found
        seen_hint = True
        return False

    try:
        database.scan(data, match_event_handler=on_match)
    except hyperscan.ScanTerminated:
        return True
    return None if seen_hint else False


def _ids_in(data: bytes, database: hyperscan.Database) -> set[int]:
    found: set[int] = set()
    database.scan(data, match_event_handler=lambda i, _f, _t, _fl, _c: found.add(i))
    return found
