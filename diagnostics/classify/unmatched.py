"""The verdicts of a log no rule reads, from its shape: a failed start that ends inside a
traceback (judged by where it was raised when the frames say), ends after an error
logged at level ERROR, or whose vLLM exited; an offline engine that is up; and the
evidence lines they quote. And what the log's last lines tell of a verdict
(:func:`with_tail`): a server at work (:mod:`diagnostics.classify.serving`), a
catalogued message whose line lost its start (:func:`with_cut_message`), or a start
under way that ends in a message a raise site builds, printed bare
(:func:`with_bare_message`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Reversible, Sequence
from functools import cache

from diagnostics.classify.normalize import clean_raw, normalize
from diagnostics.classify.progress import Progress
from diagnostics.classify.serving import UNDER_WAY, marked, with_serving
from diagnostics.classify.verdict import judged_by_origin, judged_found, raised_as
from diagnostics.model import Category, Diagnosis, Evidence, State
from diagnostics.pack.catalogue import Found, load_catalogue
from diagnostics.pack.evidence import Provenance
from diagnostics.pack.rules import RulePack
from diagnostics.redaction.redact import Redactor, redact


def unmatched(
    progress: Progress,
    recent: Reversible[tuple[int, str]],
    provenance: Provenance,
    redactor: Redactor,
    exited: bool,
    exit_code: int | None,
) -> Diagnosis | None:
    """The verdict when no rule's finding stands: a log that ends in a traceback or after
    an error line (while vLLM runs, or the log ends), or vLLM exited; an offline engine
    that is up (ready); None: a start under way."""
    if exited:
        return no_rule_matched(last_evidence(recent, redactor), exit_code, progress.phase)
    if progress.traceback is not None:
        evidence = line_evidence(recent, progress.traceback, redactor)
        by_origin = judged_by_origin(provenance, progress.origin, evidence, redactor=redactor)
        return by_origin or ends_in_traceback(evidence)
    if progress.error is not None:
        return ends_after_error(line_evidence(recent, progress.error, redactor))
    if offline_engine_up(progress.phase, progress.context):
        return Diagnosis(state=State.READY)
    return None


def offline_engine_up(phase: State, context: Mapping[str, str]) -> bool:
    """Whether a log with no failure shows an offline ``LLM(...)`` that is up: its engine
    finished initialising (a phase marker captured ``engine_up``: graphs captured, "init
    engine ... took", its last step; or, for an engine configured ``enforce_eager=True``,
    ``kv_blocks``: its KV cache sized) and nothing shows an API server (``server``: its
    version line, ``args: Namespace(``, ``vllm serve``'s model_tag), which would still
    have to start."""
    up = "engine_up" in context or ("eager" in context and "kv_blocks" in context)
    return phase is State.LOADING and up and "server" not in context


def _transient_other(rule: str, evidence: Evidence | None, cause: str, fix: str) -> Diagnosis:
    return Diagnosis(
        state=State.FAILED_TRANSIENT,
        category=Category.OTHER,
        rule=rule,
        evidence=evidence,
        cause=cause,
        fix=fix,
    )


def ends_in_traceback(evidence: Evidence | None) -> Diagnosis:
    """A paste that stops inside (or right after) a traceback: no exception line was
    seen, and no ready marker followed. A failure, not a start under way."""
    return _transient_other(
        "log-ends-in-traceback",
        evidence,
        "The log ends inside a Python traceback, before vLLM exited and before the "
        "exception that ended it was printed.",
        "The end of vLLM's output is attached; the full output (the lines after the "
        "traceback) names the cause. A restart may help.",
    )


def ends_after_error(evidence: Evidence | None) -> Diagnosis:
    """A log that ends after vLLM (or its server) logged an error no rule names, before a
    ready marker and with no progress after it: a failure, not a start under way."""
    return _transient_other(
        "log-ends-after-error",
        evidence,
        "The log ends after vLLM reported a problem that matches no known cause (an "
        "error, or processes waiting on each other), before it was ready and with no "
        "progress after it.",
        "The evidence line is the error; the lines after it in the full output name the "
        "cause. A restart may help; if it fails the same way, change what the error names.",
    )


def no_rule_matched(evidence: Evidence | None, exit_code: int | None, phase: State) -> Diagnosis:
    """vLLM exited and its output matches no rule."""
    how = f"with code {exit_code}" if exit_code is not None else ""
    where = "after it was ready" if phase is State.READY else f"while {phase}"
    return _transient_other(
        "no-rule-matched",
        evidence,
        f"vLLM exited {how} {where}; its output matches no known failure.".replace("  ", " "),
        "The end of vLLM's output is attached; a restart may help. If it fails the same "
        "way again, check the configuration named in that output.",
    )


def line_evidence(
    recent: Reversible[tuple[int, str]], lineno: int, redactor: Redactor
) -> Evidence | None:
    """Line ``lineno`` of the recent lines, else the last non-blank one."""
    for line, text in recent:
        if line == lineno:
            return Evidence(line, redactor(clean_raw(text)))
    return last_evidence(recent, redactor)


def last_evidence(recent: Reversible[tuple[int, str]], redactor: Redactor) -> Evidence | None:
    """The last non-blank line of the recent lines."""
    for line, text in reversed(recent):
        if text.strip():
            return Evidence(line, redactor(clean_raw(text)))
    return None


def with_tail(
    verdict: Diagnosis,
    tail: Callable[[], Sequence[str]],
    pack: RulePack,
    redactor: Redactor = redact,
    first_line: Callable[[], int] | None = None,
) -> Diagnosis:
    """``verdict`` as the log's last lines (``tail()``, raw, read at most once and only
    when the verdict asks; ``first_line()``: the number of the first of them) tell it:
    :func:`~diagnostics.classify.serving.with_serving`, then :func:`with_cut_message`,
    then :func:`with_bare_message`."""
    lines = cache(tail)
    verdict = with_cut_message(with_serving(verdict, lines, pack), lines, pack, redactor)
    if first_line is None:
        return verdict
    return with_bare_message(verdict, lines, first_line, pack, redactor)


_NO_CAUSE = frozenset({"structure", "consequence", "shape"})


def with_cut_message(
    verdict: Diagnosis,
    tail: Callable[[], Sequence[str]],
    pack: RulePack,
    redactor: Redactor = redact,
) -> Diagnosis:
    """``verdict``, or, when it calls the failure other without naming a cause (generic
    structure, a consequence, the log's shape), the verdict of a catalogued message
    whose line lost its start (a screenshot cropped, a quote begun mid-line: no rule
    reads it, its opening words are gone) among the failed start's last lines: after
    the last line of a start under way or a server at work, the earliest such message,
    read to its end (:meth:`~diagnostics.pack.catalogue.Catalogue.lookup_ending`). Its
    line number is counted from the verdict's evidence line, which must be among them."""
    evidence = verdict.evidence
    if evidence is None or verdict.category is not Category.OTHER:
        return verdict
    rule = pack.verdicts_rule(verdict.rule)  # None: a shape (above) or a derived verdict
    if rule is not None and rule.kind not in _NO_CAUSE:
        return verdict
    failed = [(at, line) for at, line, _mark in _until_marked(marked(tail(), pack))]
    where = next((at for at, line in failed if clean_raw(line) == evidence.text), None)
    if where is None:
        return verdict
    catalogue = load_catalogue()
    for at, line in reversed(failed):  # the earliest first
        text = normalize(line)
        found = catalogue.lookup_ending(text)
        if found is not None and _cut_cause(found):
            return judged_found(
                pack.provenance,
                found,
                raised_as("", found),
                f" (the log shows its end): {text.strip()}",
                Evidence(evidence.line + at - where, redactor(clean_raw(line))),
                redactor,
            )
    return verdict


def _cut_cause(found: Found) -> bool:
    """A message read from inside it (not whole: the whole one is an exception line's or
    a log line's, which the rules read) that names a category."""
    return not found.whole and found.entry.category is not Category.OTHER


# A log level on the line: a message logged (a warning, a notice), not raised.
_LEVEL = re.compile(r"\b(?:DEBUG|INFO|NOTICE|WARN|WARNING|TRACE)\b")


def with_bare_message(
    verdict: Diagnosis,
    tail: Callable[[], Sequence[str]],
    first_line: Callable[[], int],
    pack: RulePack,
    redactor: Redactor = redact,
) -> Diagnosis:
    """``verdict``, or, when it is a start under way, the verdict of a message that one
    of the catalogue's raise sites builds, naming a category, printed bare after the
    start's last line under way: a paste of the message alone (its exception's class and
    the traceback not kept, its start perhaps cut), so no rule reads it. vLLM raises it
    and the start goes no further: the start failed with it. The earliest such line
    decides; a line with a log level (a message logged, not raised) or that quotes code
    (a frame's ``raise``) does not count. Its number: ``first_line()`` (the tail's first
    line's, counted only then) plus its index."""
    if verdict.state not in UNDER_WAY:
        return verdict
    after = [(at, line) for at, line, _mark in _until_marked(marked(tail(), pack))]
    catalogue = load_catalogue()
    for at, line in reversed(after):  # the earliest first
        clean = clean_raw(line)
        if _LEVEL.search(clean) or "raise " in clean:
            continue
        text = normalize(line)
        found = catalogue.lookup(text) or catalogue.lookup_ending(text)
        if found is None or not _raised_cause(found):
            continue
        return judged_found(
            pack.provenance,
            found,
            raised_as("", found),
            f" (the log shows its message alone): {text.strip()}",
            Evidence(first_line() + at, redactor(clean)),
            redactor,
        )
    return verdict


def _until_marked(
    lines: Iterator[tuple[int, str, str | None]],
) -> Iterator[tuple[int, str, str | None]]:
    """The marked lines, last first, up to the first marked one."""
    for item in lines:
        if item[2] is not None:
            return
        yield item


def _raised_cause(found: Found) -> bool:
    """A message a raise site builds (not a logger's) that names a category."""
    entry = found.entry
    return not entry.exception.startswith("logger.") and entry.category is not Category.OTHER
