"""A whole log held as lines, classified: the classifier's verdict, then what the log's
last lines, its attempts and a setting it shows late make of it (for the worker's tests,
small inputs and a log cut into sections; ``diagnose`` reads files through
:mod:`diagnostics.scanning`).

Pure: lines in, a diagnosis out."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from diagnostics.attempts.last import last_attempt_of_lines
from diagnostics.classify.classifier import Classifier, following, knowing, reached
from diagnostics.classify.normalize import normalize
from diagnostics.classify.serving import tail_of
from diagnostics.classify.unmatched import with_tail
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack


def classify_lines(
    lines: Iterable[str], pack: RulePack | None = None, shown: frozenset[int] = frozenset()
) -> Diagnosis:
    """Classify a whole log given as lines (for tests and small inputs); of several
    attempts, the last one's failure (:mod:`diagnostics.attempts.last`); a setting
    shown late, known."""
    lines = list(lines)
    classifier = knowing(shown, pack).feed_all(lines)
    pack = classifier.pack
    # a server at work whose ready marker was cut off, or a request's error in one
    tail = lambda: tail_of(lines)  # noqa: E731
    first = lambda: len(lines) - len(tail()) + 1  # noqa: E731
    verdict = with_tail(classifier.diagnosis(), tail, pack, classifier.redact, first)
    again = lambda some: Classifier(pack).feed_all(some).diagnosis()  # noqa: E731
    after = lambda some: following(classifier).feed_all(some).diagnosis()  # noqa: E731
    reach = lambda some: reached(Classifier(pack).feed_all(some))  # noqa: E731
    furthest = lambda some: Classifier(pack).feed_all(some).furthest  # noqa: E731
    verdict = last_attempt_of_lines(verdict, lines, pack, again, after, reach, furthest)
    late = frozenset() if shown else settings_shown(verdict, pack, lines)
    return late_setting(verdict, late, pack, lambda: classify_lines(lines, pack, late))


def settings_shown(verdict: Diagnosis, pack: RulePack, lines: Iterable[str]) -> frozenset[int]:
    """The rules read ``anywhere`` (their ``after`` markers are settings: the environment
    the start ran in, wherever the paste shows it) that read the failed ``verdict``'s
    evidence and whose markers one of ``lines`` (raw) shows: a setting pasted after the
    failure (an environment dump, a compose file below the log) that the classifier,
    reading in order, had not seen when it read the evidence."""
    if not verdict.failed or verdict.evidence is None:
        return frozenset()
    text = normalize(verdict.evidence.text)
    rules = [r for r in pack.rules if r.anywhere and any(rx.search(text) for rx in r.patterns)]
    if not rules:
        return frozenset()
    shown = {r.priority for r in rules for line in lines if any(rx.search(line) for rx in r.after)}
    return frozenset(shown)


def late_setting(
    verdict: Diagnosis, shown: frozenset[int], pack: RulePack, again: Callable[[], Diagnosis]
) -> Diagnosis:
    """``verdict``, or the log read ``again`` knowing the settings ``shown`` anywhere
    (:func:`settings_shown`), when a rule they condition reads it so."""
    rules = {pack.rules[p].id for p in shown}
    if not rules or verdict.rule in rules:
        return verdict
    read = again()
    return read if read.rule in rules else verdict
