"""Rendering a verdict: a rule's messages with the values captured for them, the
verdicts given when no rule matched, and evidence taken from the recent lines."""

from __future__ import annotations

from collections.abc import Mapping, Reversible

from diagnostics.classify.normalize import clean_raw
from diagnostics.model import Category, Diagnosis, Evidence, State, failed_state
from diagnostics.pack.rules import Rule, template_fields
from diagnostics.redaction.redact import Redactor, redact


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


def ends_in_traceback(evidence: Evidence | None) -> Diagnosis:
    """A paste that stops inside (or right after) a traceback: no exception line was
    seen, and no ready marker followed. A failure, not a start under way."""
    return Diagnosis(
        state=State.FAILED_TRANSIENT,
        category=Category.OTHER,
        rule="log-ends-in-traceback",
        evidence=evidence,
        cause="The log ends inside a Python traceback, before vLLM exited and "
        "before the exception that ended it was printed.",
        fix="The end of vLLM's output is attached; the full output (the lines after "
        "the traceback) names the cause. A restart may help.",
    )


def no_rule_matched(evidence: Evidence | None, exit_code: int | None, phase: State) -> Diagnosis:
    """vLLM exited and its output matches no rule."""
    how = f"with code {exit_code}" if exit_code is not None else ""
    where = "after it was ready" if phase is State.READY else f"while {phase}"
    return Diagnosis(
        state=State.FAILED_TRANSIENT,
        category=Category.OTHER,
        rule="no-rule-matched",
        evidence=evidence,
        cause=f"vLLM exited {how} {where}; its output matches no known failure.".replace("  ", " "),
        fix="The end of vLLM's output is attached; a restart may help. If it fails the "
        "same way again, check the configuration named in that output.",
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
