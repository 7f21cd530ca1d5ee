"""The incremental classifier: feed vLLM's output line by line, ask for a diagnosis.

Memory is bounded by the window (recent lines kept for the tail and context), never
by the size of the log. Priority decides between rules: the rule that comes first
in the pack wins, and among its matches the first occurrence is the evidence. When
vLLM reports it is ready, earlier matches are dropped (they did not stop it); after
a requested shutdown, generic wrapper errors are ignored. After ready, a rule marked
``before_ready`` (a bare exception line: a failed request) names the cause only once
vLLM exited, and a traceback no longer ends the start; a start marker after ready
begins a new start. A traceback whose header was cut off (an elided paste) is known
by its frame, ``raise`` and position-marker lines.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from diagnostics.model import Category, Diagnosis, Evidence, State, failed_state
from diagnostics.normalize import clean_raw, normalize, unwrapped_part, wrapped_at_width
from diagnostics.redact import Redactor, redact, truncate
from diagnostics.rules import PHASES, Rule, RulePack, load_pack, template_fields

MAX_STORED_LINE = 4096


def _stored(line: str) -> str:
    """A line as kept for evidence and the tail: cut where no secret splits (a cut
    secret would no longer be recognised by the redactor)."""
    return line if len(line) <= MAX_STORED_LINE else truncate(line, MAX_STORED_LINE)


_CONTINUATION_LINES = 2
_MAX_WRAPPED_PARTS = 4  # a message hard-wrapped over more lines is not joined further


@lru_cache(maxsize=1)
def default_pack() -> RulePack:
    return load_pack()


@dataclass(frozen=True)
class _Wrapped:
    """Lines cut at a terminal's width, joined: the message may continue on the next line."""

    last: int  # line number of the last part
    first: int  # line number of the first part (the evidence)
    clean: str  # the joined raw lines (for evidence)
    text: str  # the first part normalised, the rest appended as printed
    parts: int


@dataclass
class _Hit:
    rule: Rule
    line: int
    raw: str
    text: str
    following: list[str] = field(default_factory=list)


class Classifier:
    """Reads lines as they come and keeps what a diagnosis needs."""

    def __init__(
        self, pack: RulePack | None = None, *, window: int = 400, redactor: Redactor | None = None
    ):
        self.pack = pack or default_pack()
        self.redact = redactor or redact
        self.recent: deque[tuple[int, str]] = deque(maxlen=window)
        self.phase = State.STARTING
        self.lines = 0
        self._best: _Hit | None = None
        self._collecting: _Hit | None = None
        self._frames: set[int] = set()
        self._after: set[int] = set()
        self._stopping = False
        self._ids: list[int] = []
        self._traceback: int | None = None  # line of a traceback start after the last ready
        self._late: _Hit | None = None  # a before_ready rule matched after ready
        self._context: dict[str, str] = {}  # named captures of phase markers (the version)
        self._wrapped: _Wrapped | None = None

    def feed(self, raw: str, lineno: int | None = None) -> State | None:
        """Take one raw line; return the new phase when this line changed it."""
        self.lines = lineno if lineno is not None else self.lines + 1
        line = raw.rstrip("\r\n")
        self.recent.append((self.lines, _stored(line)))
        if self._collecting is not None:
            self._collect(line)
        wrapped, self._wrapped = self._wrapped, None
        if wrapped is not None and wrapped.last != self.lines - 1:
            wrapped = None
        changed = self._match(line)
        if wrapped is not None:
            changed = self._match_wrapped(wrapped, line) or changed
        if wrapped_at_width(line):
            self._wrapped = self._carry(wrapped, line)
        return changed

    def _match(self, line: str) -> State | None:
        # Fast path: a pattern that matches the normalised text also matches the raw
        # line (normalising only strips prefixes), unless colour codes or carriage
        # returns sit inside it. Most lines hit nothing and end here.
        if "\x1b" not in line and "\r" not in line and not self._scan(line):
            return None
        text = normalize(line)
        ids = self._scan(text)
        if not ids:
            return None
        clean = clean_raw(line)
        changed = None
        patterns = self.pack.patterns
        for index in sorted(ids, key=lambda i: (patterns[i].kind != "traceback", i)):
            pattern = patterns[index]
            if pattern.kind == "traceback":
                self._frames.clear()
                if not self._stopping and self.phase is not State.READY:
                    self._traceback = self.lines
            elif pattern.kind == "traceback_body":
                # A traceback whose header was cut off: its first line seen counts.
                if (
                    self._traceback is None
                    and not self._stopping
                    and self.phase is not State.READY
                    and pattern.regex.search(text)
                ):
                    self._traceback = self.lines
            elif pattern.kind == "frame":
                self._frames.add(pattern.owner)
            elif pattern.kind == "after":
                self._after.add(pattern.owner)
            elif pattern.kind == "phase" and (found := pattern.regex.search(text)):
                self._context.update({k: v for k, v in found.groupdict().items() if v})
                changed = self._enter(self.pack.phases[pattern.owner].phase) or changed
            elif pattern.kind == "rule" and pattern.regex.search(text):
                self._consider(self.pack.rules[pattern.owner], clean, text)
        return changed

    def _carry(self, wrapped: _Wrapped | None, line: str) -> _Wrapped:
        """This line looks cut at a terminal's width: keep it for joining with the next."""
        part = unwrapped_part(line)
        if wrapped is not None and wrapped.parts < _MAX_WRAPPED_PARTS:
            return _Wrapped(
                self.lines,
                wrapped.first,
                wrapped.clean + part,
                wrapped.text + part,
                wrapped.parts + 1,
            )
        # The message without its prefixes, and the spaces the cut fell after.
        trailing = part[len(part.rstrip()) :]
        return _Wrapped(self.lines, self.lines, part, normalize(line) + trailing, 1)

    def _match_wrapped(self, wrapped: _Wrapped, line: str) -> State | None:
        """Match a message hard-wrapped at a terminal's width, its parts joined. The
        continuation is appended as printed: a terminal cuts mid-word and mid-number.
        Phase markers count too (a shutdown or ready line cut at the width)."""
        continuation = clean_raw(line)
        clean, text = (wrapped.clean + continuation).rstrip(), wrapped.text + continuation
        patterns = self.pack.patterns
        changed = None
        for index in sorted(self._scan(text)):
            pattern = patterns[index]
            if pattern.kind == "frame":
                self._frames.add(pattern.owner)
            elif pattern.kind == "phase" and (found := pattern.regex.search(text)):
                # Only a marker the cut split: one either part shows was entered already
                # (entering ready again would drop a failure on the next line).
                if pattern.regex.search(wrapped.text) or pattern.regex.search(continuation):
                    continue
                self._context.update({k: v for k, v in found.groupdict().items() if v})
                changed = self._enter(self.pack.phases[pattern.owner].phase) or changed
            elif pattern.kind == "rule" and pattern.regex.search(text):
                self._consider(self.pack.rules[pattern.owner], clean, text, wrapped.first)
        return changed

    def _collect(self, line: str) -> None:
        """Keep up to two continuation lines after the evidence (terminal wraps)."""
        assert self._collecting is not None
        text = normalize(line)
        if line == text and len(self._collecting.following) < _CONTINUATION_LINES:
            self._collecting.following.append(_stored(text))
        else:
            self._collecting = None

    def feed_all(self, lines: Iterable[str]) -> Classifier:
        for line in lines:
            self.feed(line)
        return self

    def tail(self, count: int = 60) -> list[str]:
        """The last ``count`` lines seen (redacted), oldest first."""
        lines = list(self.recent)[-count:]
        return [self.redact(clean_raw(text)) for _, text in lines]

    @property
    def failure_seen(self) -> bool:
        """A failure rule has matched (cheap: no rendering, unlike diagnosis())."""
        return self._best is not None

    @property
    def best_rule(self) -> Rule | None:
        """The rule the verdict names now (None: no failure matched since the last ready)."""
        return None if self._best is None else self._best.rule

    @property
    def wants_next_line(self) -> bool:
        """Whether the next line matters even when no pattern hits it: it may continue
        the evidence, or join a line cut at a terminal's width."""
        return self._collecting is not None or self._wrapped is not None

    def recall(self, latest: Mapping[str, str]) -> None:
        """Phase-marker captures (the version...) as of the end of a log of which only
        some lines were fed (diagnose skips what cannot change the verdict): these win."""
        self._context.update(latest)

    def diagnosis(self, *, exit_code: int | None = None, exited: bool = False) -> Diagnosis:
        """The verdict so far. ``exited``: vLLM is gone, so a start without a match failed."""
        if self._best is not None:
            return self._render(self._best)
        if self._late is not None and (exited or exit_code is not None):
            return self._render(self._late)
        if self._traceback is not None and not (exited or exit_code is not None):
            # A paste that stops inside (or right after) a traceback: no exception line
            # was seen, and no ready marker followed. A failure, not a start under way.
            return Diagnosis(
                state=State.FAILED_TRANSIENT,
                category=Category.OTHER,
                rule="log-ends-in-traceback",
                evidence=self._line_evidence(self._traceback),
                cause="The log ends inside a Python traceback, before vLLM exited and "
                "before the exception that ended it was printed.",
                fix="The end of vLLM's output is attached; the full output (the lines after "
                "the traceback) names the cause. A restart may help.",
            )
        if exited or exit_code is not None:
            how = f"with code {exit_code}" if exit_code is not None else ""
            where = "after it was ready" if self.phase is State.READY else f"while {self.phase}"
            return Diagnosis(
                state=State.FAILED_TRANSIENT,
                category=Category.OTHER,
                rule="no-rule-matched",
                evidence=self._last_evidence(),
                cause=f"vLLM exited {how} {where}; its output matches no known failure.".replace(
                    "  ", " "
                ),
                fix="The end of vLLM's output is attached; a restart may help. If it fails the "
                "same way again, check the configuration named in that output.",
            )
        return Diagnosis(state=self.phase)

    # internals

    def _scan(self, text: str) -> set[int]:
        ids: set[int] = set()
        self.pack.line_database.scan(
            text.encode("utf-8", "surrogateescape"),
            match_event_handler=lambda i, _f, _t, _fl, _c: ids.add(i),
        )
        return ids

    def _enter(self, name: str) -> State | None:
        if name == "stopping":
            self._stopping = True
            return None
        state = PHASES[name]
        assert state is not None  # only "stopping" has none, handled above
        if state is State.STARTING and self.phase is not State.READY:
            return None  # the start under way announcing itself: nothing changes
        if state is State.STARTING:
            self._late = None  # a new start after a ready one: judged afresh
        self._traceback = None  # the start went on after any traceback seen so far
        if state is State.READY:
            # Whatever matched before did not stop vLLM from serving, and nothing seen
            # before bears on what follows (diagnose reads a log from its last ready
            # marker on): traceback frames and `after` markers are forgotten too.
            self._best = self._collecting = self._late = None
            self._stopping = False
            self._frames.clear()
            self._after.clear()
        if state is self.phase:
            return None
        self.phase = state
        return state

    def _consider(self, rule: Rule, clean: str, text: str, line: int | None = None) -> None:
        if self._stopping and rule.generic:
            return
        if rule.traceback_through and rule.priority not in self._frames:
            return
        if rule.after and rule.priority not in self._after:
            return
        if self._best is not None and self._best.rule.priority <= rule.priority:
            return
        if rule.before_ready and self.phase is State.READY:
            # A bare error after ready (a failed request) is not the end of vLLM; it
            # only names the cause once vLLM exited.
            if self._late is None:
                self._late = _Hit(rule, line or self.lines, _stored(clean), _stored(text))
            return
        self._best = self._collecting = _Hit(
            rule, line or self.lines, _stored(clean), _stored(text)
        )

    def _captures(self, hit: _Hit) -> dict[str, str]:
        texts = [hit.text]
        for n in range(1, len(hit.following) + 1):
            texts.append(hit.text + "".join(hit.following[:n]))
            texts.append(" ".join([hit.text, *hit.following[:n]]))
        found: dict[str, str] = {}
        for regex in hit.rule.patterns:
            for text in texts:
                match = regex.search(text)
                if not match:
                    continue
                for name, value in match.groupdict().items():
                    if value is not None and name not in found:
                        found[name] = value
        return found

    def _render(self, hit: _Hit) -> Diagnosis:
        evidence = Evidence(hit.line, self.redact(hit.raw))
        captured = {**self._context, **self._captures(hit)}
        return render_rule(hit.rule, captured, evidence, self.redact)

    def _line_evidence(self, lineno: int) -> Evidence | None:
        for line, text in self.recent:
            if line == lineno:
                return Evidence(line, self.redact(clean_raw(text)))
        return self._last_evidence()

    def _last_evidence(self) -> Evidence | None:
        for line, text in reversed(self.recent):
            if text.strip():
                return Evidence(line, self.redact(clean_raw(text)))
        return None


def render_rule(
    rule: Rule, captured: Mapping[str, str], evidence: Evidence | None, redactor: Redactor = redact
) -> Diagnosis:
    """The diagnosis ``rule`` gives with ``captured`` values for its templates.

    The classifier renders a match with it; the worker's pre-flight renders a predicted
    failure with it (its numbers in place of captures), so both read the same.
    """
    values = {**rule.defaults, **captured}
    state, cause, fix = failed_state(rule.category), rule.cause, rule.fix
    # Permanence by evidence: the captured numbers show a host condition.
    if rule.transient_if is not None and rule.transient_if.holds(captured):
        state = State.FAILED_TRANSIENT
        cause, fix = rule.transient_if.cause, rule.transient_if.fix
    needed = template_fields(cause) | template_fields(fix)
    safe = {name: redactor(values.get(name, "?")).strip() for name in needed}
    return Diagnosis(
        state=state,
        category=rule.category,
        rule=rule.id,
        evidence=evidence,
        cause=" ".join(redactor(cause.format_map(safe)).split()),
        fix=" ".join(redactor(fix.format_map(safe)).split()),
    )


def classify_lines(lines: Iterable[str], pack: RulePack | None = None) -> Diagnosis:
    """Classify a whole log given as lines (convenience for tests and small inputs)."""
    return Classifier(pack).feed_all(lines).diagnosis()
