"""The failure matches the classifier keeps: every rule's first finding of the failed
start (bounded by the pack: one per rule) with its position, its rule's kind and the
traceback chain it belongs to; the best of them (the evidence, with the lines that
continue it); a ``before_ready`` match after ready (what a match's lines capture:
:mod:`diagnostics.classify.wrapping`).

The best finding: the lowest rank (``diagnostics.pack.pack.tier``: a specific cause
beats generic structure, which beats a consequence; memory, then device faults, first
among causes; pack order inside the structure kind), then the earliest line. Python
prints a chain's origin first ("The above exception was the direct cause of the
following exception", "During handling of the above exception"), so among specific
causes the chain's origin is its earliest finding, and across chains the earliest one
wins; an exception line takes the place of the ``raise`` code line that raised it
(:class:`Raising`). The order is total and a later line never beats an earlier one of
the same rank (generic structure's catalogued chain end is read in its place:
:func:`translated`), so the choice is made as lines come (constant memory) and the fast
path can skip what cannot beat it. Once a requested shutdown began (a stopping marker), a
specific cause found before it is the verdict: what the shutdown prints does not compete
with it."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from diagnostics.classify.linereading import EXCEPTION_LINE, RAISE_CODE, logged_repr, raised_by
from diagnostics.classify.normalize import wrapped_at_width
from diagnostics.classify.progress import Origin, Progress, logged_below_error, warned
from diagnostics.classify.told import told
from diagnostics.classify.wrapping import MAX_WRAPPED_PARTS, joined
from diagnostics.model import Category, State
from diagnostics.pack.catalogue import Found, load_catalogue
from diagnostics.pack.pack import claim_rank
from diagnostics.pack.rules import Rule
from diagnostics.redaction.redact import truncate

MAX_STORED_LINE = 4096


def stored(line: str) -> str:
    """A line as kept for evidence and the tail: cut where no secret splits (a cut
    secret would no longer be recognised by the redactor)."""
    return line if len(line) <= MAX_STORED_LINE else truncate(line, MAX_STORED_LINE)


# Whether a raw line, read under a service (or None), is another vLLM service's than the
# line read last (classify.services.Services.apart)
Apart = Callable[[str, str | None], bool]


class Hit(NamedTuple):
    rule: Rule
    line: int
    raw: str
    text: str
    following: list[str]  # continuation lines, appended while collecting
    chain: int = 0  # the traceback chain it belongs to (Progress.chain)
    origin: Origin | None = None  # where the exception was raised (Progress.origin)
    at: int = 0  # the order it was read in (a reversed console export: not ``line``)
    header: bool = False  # read from an IPython header (the class only, before the frames)
    phase: State | None = None  # the start's phase when it was found
    service: str | None = None  # the service (or tail's file) it was read under
    bar: tuple[str, int] = ("", -1)  # the last download bar shown: file, percent (-1: none)
    told: bool = False  # inside a message a person's sentence quotes (classify.told)
    foreign: bool = False  # ends another program's traceback (Progress.foreign)

    @property
    def key(self) -> tuple[int, int, int, int]:
        # a told cause or structure after the output's, before a consequence or a shape
        level = 2 if self.rule.kind in _SAYS_LESS else 1 if self.told else 0
        return (level, self.rule.rank, self.at, self.rule.priority)


_SAYS_LESS = frozenset({"consequence", "shape"})


class Raising:
    """The best finding's ``raise X(...)`` code line, and the line of the exception it
    raised once read. Python prints the statement that raised under the innermost frame,
    then the exception: one event, the code line its template (an f-string's ``{name}``
    where the message has the value). A finding on an exception line at most
    ``RAISED_WITHIN`` lines under that code line takes the code line's place
    (:meth:`place`): among the specific causes the two lines show, the pack's order
    decides, as for two readings of one line, not the line printed first; the same
    rule's finding moves to the exception line. Line numbers alone decide, so the fast
    path, which reads only the lines that can change the verdict, decides alike."""

    def __init__(self) -> None:
        self.code: Hit | None = None
        self.raised: int | None = None

    def note(self, best: Hit) -> None:
        """``best`` is the best finding now: a code line's, whose exception may follow."""
        if RAISE_CODE.match(best.text):
            self.code, self.raised = best, None

    def place(self, hit: Hit) -> Hit:
        """``hit`` at its place, or at the code line's that raised its exception line."""
        code = self.code
        if code is None or hit.rule.rank > code.rule.rank or hit.line == code.line:
            return hit  # (a worse reading: the fast path does not read its line)
        if hit.line == self.raised or (
            self.raised is None
            and code.line < hit.line <= code.line + RAISED_WITHIN
            and raised_by(code.text, hit.text.lstrip())
        ):
            self.raised = hit.line
            return hit._replace(at=code.at)
        self.code = self.raised = None
        return hit


class Findings:
    """The best match so far, the match still collecting continuation lines, and a
    late (``before_ready`` after ready) match."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.best: Hit | None = None
        self.collecting: Hit | None = None
        self.late: Hit | None = None
        self.translated: Hit | None = None  # the best's chain's end (:func:`translated`)
        self.found: dict[int, Hit] = {}  # rule priority -> its first finding
        self._raising = Raising()
        # (first line, last line, priority): the rules that read the last lines first
        self._claims: deque[tuple[int, int, tuple[int, int]]] = deque(maxlen=8)

    def consider(
        self,
        rule: Rule,
        clean: str,
        text: str,
        line: int,
        progress: Progress,
        through: int = 0,
        at: int = 0,
        header: bool = False,
    ) -> None:
        """A match of ``rule`` on ``line`` (to line ``through``: a line cut at a terminal's
        width, read whole with its rest; ``header``: an IPython header's class)."""
        if progress.stopping and (rule.generic or self._cause_stands()):
            # What a requested shutdown prints (a wrapper's errors, the faults of a torn
            # down CUDA context in a thread still running) is the shutdown's: a specific
            # cause found before it stands.
            return
        if rule.traceback_through and rule.priority not in progress.frames:
            return
        if rule.after and rule.priority not in progress.after:
            return
        # One line, one reading: the rule first in the pack that accepts a line reads it
        # (the wrapper's own exception line is the wrapper's, not a bare exception). A
        # line cut at a terminal's width is read whole with its rest (to ``through``):
        # what a later rule matched on a part alone goes, and so does what the same rule
        # matched on a later part alone (pydantic's mark ends the message: its last part
        # alone reads as a bare validation error). The same rule on the first part alone
        # keeps its reading: that line was whole, and the next one another message.
        last = max(through, line)
        rank = claim_rank(rule)
        overlapping = [c for c in self._claims if c[0] <= last and line <= c[1]]
        for first, _end, by in overlapping:
            if by < rank or (by == rank and first <= line):
                return
        if overlapping:
            self._retract(line, last, rank)
        self._claims.append((line, last, rank))
        chain, origin = progress.chain, progress.origin
        if not header and rule.kind == "structure" and logged_repr(text, clean):
            # its repr stands for the exception line of the traceback it announces
            header, chain = True, chain + 1
        # where it was found (phase, service, download bar) and whether a person told of it
        where = (*progress.where, "`" in text and told(rule.patterns, text), progress.foreign)
        hit = Hit(rule, line, stored(clean), stored(text), [], chain, origin, at, header, *where)
        warning = progress.phase is State.READY and logged_below_error(clean)
        if warning or (rule.before_ready and progress.phase is State.READY):
            # A bare error after ready (a failed request) or a warning logged (lm-eval's)
            # is no end of vLLM: it names the cause once vLLM exited (an error first).
            if self.late is None or (not warning and logged_below_error(self.late.raw)):
                self.late = hit
            return
        hit = self._raising.place(hit)
        kept = self.found.setdefault(rule.priority, hit)
        stood_for = kept.header and not header and kept.chain == hit.chain
        if stood_for or (kept is not hit and kept.at == hit.at and kept.line < hit.line):
            # The exception line the header or the code line stood for (its message,
            # with its values; where it was raised), in their place.
            hit = self.found[rule.priority] = hit._replace(at=kept.at)
            if self.best is kept:
                self.best = self.collecting = hit
            return
        if kept is self.best and kept.rule.kind == "structure" and kept.chain == hit.chain:
            self.translated = hit
        if self.best is not None and self.best.key <= hit.key:
            return
        self.best, self.collecting, self.translated = hit, hit, None
        self._raising.note(hit)

    def outlived(self, ready: bool, engine_done: bool, apart: Apart) -> bool:
        """A ready marker (``ready``) or the engine's end of initialisation
        (``engine_done``) came: forget what the start outlived (whatever matched before
        ready; a warning before the engine's end, see ``warned``). False when the best
        finding is another vLLM service's (``apart``): then a ready marker says nothing
        of its failure and does not count."""
        best = self.best
        if best is not None and apart(best.raw, best.service):
            return not ready
        if ready or (engine_done and best is not None and warned(best.raw)):
            self.clear()
        return True

    def _cause_stands(self) -> bool:
        return self.best is not None and self.best.rule.kind == "cause"

    @property
    def settled(self) -> int | None:
        """The rank a finding must beat to change the verdict (None: no finding yet); an
        IPython header's reading stands until its traceback's exception line, of the
        same rank, comes, and a code line's until the exception line it raised."""
        if self.best is None or self.best.told:  # (told: any line may beat it)
            return None
        pending = self.best.header or self.best is self._raising.code
        return self.best.rule.rank + (1 if pending else 0)

    def _retract(self, first: int, last: int, rank: tuple[int, int]) -> None:
        """Forget the findings on lines ``first``..``last`` of the rule of claim ``rank``
        and the rules after it."""
        for key, hit in list(self.found.items()):
            if first <= hit.line <= last and claim_rank(hit.rule) >= rank:
                del self.found[key]
        best = self.best
        if best is not None and first <= best.line <= last and claim_rank(best.rule) >= rank:
            self.best = min(self.found.values(), key=lambda h: h.key, default=None)
            self.collecting = self.translated = None

    def collect(self, line: str, text: str, before: str = "") -> None:
        """Keep the continuation lines after the evidence (terminal wraps, a paste's
        reflow): up to the rule's ``message_lines`` (three unless it says more), or while
        the line before is cut at a terminal's width, as many as the classifier joins.
        ``line``: without the evidence's process prefix; ``text``: the line normalised (a
        line the normaliser changes is a new record); ``before``: the raw line before it
        (its trailing spaces, where a cut may fall, count; the evidence is kept without)."""
        hit = self.collecting
        assert hit is not None
        cut = wrapped_at_width(before)
        limit = (MAX_WRAPPED_PARTS if cut else hit.rule.message_lines) - 1
        # after an exception line, another one is the next exception, not its message
        # (after a `raise X(` code line, it is the exception that line raised)
        following = not cut and EXCEPTION_LINE.match(hit.text.lstrip())
        new = (
            _RECORD.match(line)
            or (following and EXCEPTION_LINE.match(line))
            or line.lstrip().startswith(_TRACEBACK_LINES)  # the record's traceback follows
        )
        if line.rstrip() == text and len(hit.following) < limit and not new:
            spaces = before[len(before.rstrip()) :]
            hit.following.append(stored(spaces + line.rstrip()))
        else:
            self.collecting = None


# A native logger's record header (Ray's and glog's, which normalising keeps: their level
# is read): the start of another record, never the message going on.
_RECORD = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ [DIWEF] \d+ \d+\] |\[?[DIWEF]\d{3,4} \d\d:"
)

# A traceback's header or frame: never the message going on.
_TRACEBACK_LINES = ("Traceback (most recent call last)", 'File "')

# The most lines the exception line a ``raise X(`` code line raised follows it by (the
# statement's other lines, the position markers of Python 3.11+).
RAISED_WITHIN = 4


def named_by_late(late: Hit | None, best: Hit) -> Hit:
    """``best``, unless it only says that vLLM ended after ready (a consequence or a shape
    read after ready: the shell's ``Killed``, a fatal signal's shutdown) and a bare error
    after ready (``late``, Findings.late) came before it: that error, which the end shows
    was no failed request the server outlived but what ended it."""
    if late is None or best.rule.kind not in _SAYS_LESS or best.phase is not State.READY:
        return best
    return late if late.at < best.at else best


def translated(best: Hit, later: Hit | None) -> Hit:
    """The best finding, or ``later``, the exception its chain ended in (Findings.
    translated), when a generic structure rule read both and only the later message is
    catalogued as more than "other": vLLM caught an error it did not explain and raised
    its own message from it (an ``IndexError`` turned into "Error setting ...")."""
    return best if later is None or catalogued(best) or not catalogued(later) else later


def catalogued(hit: Hit) -> Found | None:
    """The catalogued message, more than "other", the finding holds (with what continues it)."""
    texts = [*joined(hit), hit.text] if hit.following else [hit.text]
    found = next((f for t in texts if (f := load_catalogue().lookup(t)) is not None), None)
    return found if found is not None and found.entry.category is not Category.OTHER else None
