"""The verdicts of a log no rule reads, from its shape: a failed start that ends inside a
traceback (judged by where it was raised when the frames say), ends after an error
logged at level ERROR, or whose vLLM exited; an offline engine that is up; and the
evidence lines they quote."""

from __future__ import annotations

from collections.abc import Mapping, Reversible

from diagnostics.classify.normalize import clean_raw
from diagnostics.classify.progress import Progress
from diagnostics.classify.verdict import judged_by_origin
from diagnostics.model import Category, Diagnosis, Evidence, State
from diagnostics.pack.evidence import Provenance
from diagnostics.redaction.redact import Redactor


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
