"""The incremental classifier: feed vLLM's output line by line, ask for a diagnosis.

Memory is bounded by the window (recent lines kept for the tail and context), never
by the size of the log. The verdict is the best finding of the failed start: by the
kind of its rule (a specific cause, generic structure, a consequence), then the
earliest (:mod:`diagnostics.classify.findings`); an exception only generic structure
names, or a log that ends in a traceback, is judged by where it was raised
(:func:`diagnostics.classify.verdict.judged_by_origin`). When
vLLM reports it is ready, earlier matches are dropped (they did not stop it); after
a requested shutdown, generic wrapper errors are ignored. After ready, a rule marked
``before_ready`` (a bare exception line: a failed request) names the cause only once
vLLM exited (or a traceback left vLLM's program), and a traceback no longer ends the
start; a start marker after ready begins a new start. A traceback whose header was
cut off (an elided paste) is known by its frame, ``raise`` and position-marker lines.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from functools import lru_cache, partial

from diagnostics.classify.findings import Findings, Hit, named_by_late, stored, translated
from diagnostics.classify.linereading import HEADER_CLASS, PHASE, RULE, access_line, read_line
from diagnostics.classify.linereading import hit_ids as _hit_ids
from diagnostics.classify.linereading import may_match as _may_match
from diagnostics.classify.linereading import rules_matching as _rules_matching
from diagnostics.classify.normalize import (
    clean_raw,
    continuation,
    normalize,
    reshape,
    wrapped_at_width,
)
from diagnostics.classify.progress import PHASE_ORDER, Progress, outgrown
from diagnostics.classify.services import Services
from diagnostics.classify.unmatched import unmatched
from diagnostics.classify.verdict import render_hit, render_rule
from diagnostics.classify.wrapping import Wrapped, carry, continues, refined
from diagnostics.model import Diagnosis, State
from diagnostics.pack.rules import PHASES, Pattern, RulePack, load_pack
from diagnostics.redaction.redact import Redactor, redact

# The parts live in progress, findings, verdict and wrapping; importers' names stay here.
__all__ = ["Classifier", "default_pack", "render_rule"]


@lru_cache(maxsize=1)
def default_pack() -> RulePack:
    return load_pack()


class Classifier:
    """Reads lines as they come and keeps what a diagnosis needs."""

    def __init__(
        self, pack: RulePack | None = None, *, window: int = 400, redactor: Redactor | None = None
    ):
        self.pack = pack or default_pack()
        self.redact = redactor or redact
        self.recent: deque[tuple[int, str]] = deque(maxlen=window)
        self.lines = 0
        self.fed = 0  # lines fed: the order findings were read in
        self._progress = Progress()  # phase, shutdown, traceback, frames, captures
        self.furthest = State.STARTING  # the furthest phase this start reached
        self.findings = Findings()  # the failure matches
        self._wrapped: Wrapped | None = None
        self._services = Services()

    @property
    def phase(self) -> State:
        return self._progress.phase

    def feed(self, raw: str, lineno: int | None = None) -> State | None:
        """Take one raw line; return the new phase when this line changed it."""
        self.lines = lineno if lineno is not None else self.lines + 1
        self.fed += 1
        line = raw.rstrip("\r\n")
        if self._services.foreign(line):  # another compose service's line
            return None
        self._progress.service = self._services.current
        if (collecting := self.findings.collecting) is not None:
            before = self.recent[-1][1] if self.recent else ""
            rest = continuation(line, collecting.raw)
            self.findings.collect(rest, normalize(rest), before)
        self.recent.append((self.lines, stored(line)))
        wrapped, self._wrapped = self._wrapped, None
        if wrapped is not None and (wrapped.last != self.lines - 1 or not continues(wrapped, line)):
            wrapped = None
        changed = self._match(line)
        if wrapped is not None:
            changed = self._match_wrapped(wrapped, line) or changed
        if wrapped_at_width(line):
            self._wrapped = carry(wrapped, line, self.lines)
        return changed

    def _match(self, line: str) -> State | None:
        reading = read_line(self.pack, line)
        if reading is None:
            return None
        if reading.error_level:
            self._progress.error_level(self.lines)
        changed, patterns, text, clean = None, self.pack.patterns, reading.text, reading.clean
        for what, index, value in reading.actions:
            pattern = patterns[index]
            if what == PHASE:
                assert isinstance(value, dict)
                changed = _phase_marker(self, pattern, value) or changed
            elif what == RULE:
                rule = self.pack.rules[pattern.owner]
                self.findings.consider(rule, clean, text, self.lines, self._progress, 0, self.fed)
            elif what == HEADER_CLASS:
                _read_class(self, str(value).rsplit(".", 1)[-1], clean)
            else:
                self._progress.saw(pattern, text, self.lines)
        return changed

    def _match_wrapped(self, wrapped: Wrapped, line: str) -> State | None:
        """Match a message hard-wrapped at a terminal's width, its parts joined. The
        continuation is appended as printed: a terminal cuts mid-word and mid-number.
        Phase markers count too (a shutdown or ready line cut at the width)."""
        rest = continuation(clean_raw(line), wrapped.clean)
        clean, text = (wrapped.clean + rest).rstrip(), reshape(wrapped.text + rest)
        patterns = self.pack.patterns
        changed = None
        for index in () if access_line(text) else sorted(_hit_ids(self.pack, text)):
            pattern = patterns[index]
            if pattern.kind == "frame":
                self._progress.frames.add(pattern.owner)
            elif pattern.kind == "traceback_body":
                self._progress.frame(text)  # a frame line cut in its path or function
            elif pattern.kind == "phase" and (found := pattern.regex.search(text)):
                # Only a marker the cut split: one either part shows was entered already
                # (entering ready again would drop a failure on the next line).
                if pattern.regex.search(wrapped.text) or pattern.regex.search(rest):
                    continue
                changed = _phase_marker(self, pattern, found.groupdict()) or changed
            elif pattern.kind == "rule" and not _its_own(pattern, text, rest):
                rule, first = self.pack.rules[pattern.owner], wrapped.first or self.lines
                at = self.fed - (self.lines - first)
                self.findings.consider(rule, clean, text, first, self._progress, self.lines, at)
        return changed

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
        return self.findings.best is not None

    @property
    def wants_next_line(self) -> bool:
        """Whether the next line matters even when no pattern hits it: it may continue
        the evidence, or join a line cut at a terminal's width."""
        return self.findings.collecting is not None or self._wrapped is not None

    def recall(self, latest: Mapping[str, str]) -> None:
        """Phase-marker captures (the version...) as of the end of a log of which only
        some lines were fed (diagnose skips what cannot change the verdict): these win."""
        self._progress.context.update(latest)

    @property
    def vllm_left(self) -> bool:
        """Before ready, a traceback of vLLM's code left the program that ran it, and no
        new start of vLLM followed: a ready marker now is another program's."""
        return self._progress.left

    def diagnosis(self, *, exit_code: int | None = None, exited: bool = False) -> Diagnosis:
        """The verdict so far. ``exited``: vLLM is gone, so a start without a match failed."""
        findings, progress, context = self.findings, self._progress, self._progress.context
        may = partial(_may_match, self.pack)
        if findings.best is not None:
            best = translated(findings.best, findings.translated)
            best = named_by_late(findings.late, _chosen(best, progress, self.pack))
            return render_hit(best, context, self.pack.provenance, self.redact, may)
        gone, provenance = exited or exit_code is not None or progress.exited, self.pack.provenance
        if findings.late is not None and gone:
            return render_hit(findings.late, context, None, self.redact, may)
        verdict = unmatched(progress, self.recent, provenance, self.redact, gone, exit_code)
        return verdict if verdict is not None else Diagnosis(state=self.phase)


def _phase_marker(
    classifier: Classifier, pattern: Pattern, groups: Mapping[str, str | None]
) -> State | None:
    """A phase marker's line: the new phase when it changed one (Classifier.feed)."""
    classifier._progress.logged(groups)
    name = classifier.pack.phases[pattern.owner].phase
    state = PHASES[name]
    if state is State.STARTING and classifier.phase is State.READY:
        classifier.findings.late = None  # a new start after a ready one: judged afresh
    if state is State.STARTING and _a_vllm_start(groups):
        classifier._progress.left = False  # a new start of vLLM announcing itself
    ready, done = state is State.READY, bool(groups.get("engine_done"))
    if ready and classifier._progress.left:
        return None  # vLLM's program ended before: another program's server is up
    _outgrow(classifier, state, groups)
    if not classifier.findings.outlived(ready, done, classifier._services.apart):
        return None  # another vLLM service is up: this one's failure stands
    entered = classifier._progress.enter(name)
    order = PHASE_ORDER.index
    if entered is State.STARTING or (
        entered in PHASE_ORDER and order(entered) > order(classifier.furthest)
    ):
        classifier.furthest = entered  # (a weights download inside loading: still loading)
    return entered


def knowing(shown: frozenset[int], pack: RulePack | None = None) -> Classifier:
    """A classifier that knows the settings a paste shows anywhere (settings_shown)."""
    classifier = Classifier(pack)
    classifier._progress = Progress(shown)
    return classifier


def reached(classifier: Classifier) -> tuple[State, Mapping[str, str]]:
    """The phase a classifier's start is in and the settings its attempt logged (vLLM's
    arguments, its engine's config), by kind: how far an attempt got, with what
    (attempts.went_further)."""
    return classifier.phase, classifier._progress.settings


def stopping(classifier: Classifier) -> bool:
    """Whether a requested shutdown began and no start followed it (Progress.enter)."""
    return classifier._progress.stopping


def following(classifier: Classifier) -> Classifier:
    """A fresh classifier for a later part of the same log (another run): it knows which
    compose services are vLLM's (a web UI's errors after vLLM exited are not the next
    run's)."""
    later = Classifier(classifier.pack, redactor=classifier.redact)
    later._services.vllm = set(classifier._services.vllm)
    return later


def _outgrow(classifier: Classifier, state: State | None, groups: Mapping[str, str | None]) -> None:
    """The start (of the service of the line read) entered ``state`` (its marker captured
    ``groups``: a download bar's file and percent): forget the best finding if it outgrew
    it (another service's progress says nothing of a finding read under a service)."""
    file, percent = groups.get("bar_file"), groups.get("downloaded")
    bar = (file, int(percent)) if file and percent else None
    best, service = classifier.findings.best, classifier._progress.service
    if best is not None and best.service in (None, service) and outgrown(best, state, bar):
        classifier.findings.clear()


def _its_own(pattern: Pattern, joined: str, rest: str) -> bool:
    """Whether a rule's pattern misses a wrapped message ``joined`` or matches its
    continuation ``rest`` alone: then the next line's own finding (compose's "vllm-1
    exited with code 1"), not the message's."""
    return not pattern.regex.search(joined) or pattern.regex.search(rest) is not None


def _a_vllm_start(groups: Mapping[str, str | None]) -> bool:
    """Whether a start marker is vLLM's: its version, its engine, or arguments that name
    a model (another program's ``args: Namespace(`` names none: FastChat's API server)."""
    return groups.get("server") != "args" or "model" in (groups.get("settings") or "")


def _chosen(hit: Hit, progress: Progress, pack: RulePack) -> Hit:
    """The best finding as the verdict reads it: with the frames an IPython header's
    traceback showed after it, its message read whole (findings.refined)."""
    hit = _with_frames_after_header(hit, progress)
    return refined(hit, pack.rules, partial(_rules_matching, pack))


def _with_frames_after_header(hit: Hit, progress: Progress) -> Hit:
    """An IPython header names the class before the frames: the exception it reads was
    raised where the frames after it end (its traceback's innermost frame, while no
    other traceback began)."""
    origin, now = hit.origin, progress.origin
    if origin is None or origin.path or not origin.header_class or now is None:
        return hit
    if hit.chain != progress.chain or now.header_class != origin.header_class:
        return hit
    return hit._replace(origin=now)


def _read_class(classifier: Classifier, cls: str, clean: str) -> None:
    """An IPython header names the exception's class only: the rules read it as the
    exception line with its message cut (``LocalEntryNotFoundError: ``)."""
    text = f"{cls}: "
    pack, fed = classifier.pack, classifier.fed
    for index in sorted(_hit_ids(pack, text)):
        pattern = pack.patterns[index]
        if pattern.kind == "rule" and pattern.regex.search(text):
            rule = pack.rules[pattern.owner]
            progress = classifier._progress
            findings, line = classifier.findings, classifier.lines
            findings.consider(rule, clean, text, line, progress, 0, fed, header=True)
