"""A whole log held as lines, classified: the classifier's verdict, then what the log's
last lines, its attempts and a setting it shows late make of it (for the worker's tests,
small inputs and a log cut into sections; ``diagnose`` reads files through
:mod:`diagnostics.scanning`).

Pure: lines in, a diagnosis out."""

from __future__ import annotations

from collections.abc import Iterable

from diagnostics.attempts.last import last_attempt_of_lines
from diagnostics.classify.classifier import Classifier, following, knowing, reached
from diagnostics.classify.progress import late_setting, settings_shown
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
