"""Turn a ``Prediction`` into the ``Diagnosis`` the rule pack gives for the same cause.

The cause and fix are the rule's own templates, filled with the pre-flight's numbers
where vLLM's output would have filled them with captures, so the answer reads the same
whichever path found the failure; the pre-flight adds one sentence with what it
measured and says that vLLM was not started.
"""

from __future__ import annotations

from diagnostics import Diagnosis, Evidence, RulePack, State
from diagnostics.model import Category, failed_state
from diagnostics.rules import Rule, template_fields

BEFORE_LAUNCH = "Found by the pre-flight check before launch; vLLM was not started."
EVIDENCE_PREFIX = "pre-flight: "


def _squash(text: str) -> str:
    return " ".join(text.split())


def render_rule(rule: Rule, values: dict[str, str]) -> tuple[State, str, str]:
    """(state, cause, fix) of ``rule`` with ``values`` for its templates, as the
    classifier renders a match (defaults for names not given; a rule's number test
    ``transient_if`` may turn the verdict transient)."""
    state, cause, fix = failed_state(rule.category), rule.cause, rule.fix
    transient_if = getattr(rule, "transient_if", None)
    if transient_if is not None and transient_if.holds(values):
        state, cause, fix = State.FAILED_TRANSIENT, transient_if.cause, transient_if.fix
    merged = {**rule.defaults, **values}
    needed = template_fields(cause) | template_fields(fix)
    safe = {name: str(merged.get(name, "?")).strip() for name in needed}
    return state, _squash(cause.format_map(safe)), _squash(fix.format_map(safe))


def diagnose(pack: RulePack, rule_id: str, values: dict[str, str], detail: str) -> Diagnosis:
    """The pack's diagnosis for ``rule_id``, marked as found before launch."""
    rule = pack.by_id(rule_id)
    state, cause, fix = render_rule(rule, values)
    extra = _squash(f"{detail} {BEFORE_LAUNCH}")
    return Diagnosis(
        state=state,
        category=rule.category,
        rule=rule.id,
        evidence=Evidence(0, EVIDENCE_PREFIX + _squash(detail or cause)),
        cause=f"{cause} {extra}",
        fix=fix,
    )


def host_fault(check: str, error: str, category: Category) -> Diagnosis:
    """A RunPod SDK fitness check failed on this host: a restart elsewhere may help."""
    return Diagnosis(
        state=State.FAILED_TRANSIENT,
        category=category,
        rule="host-fitness-check",
        evidence=Evidence(0, f"{EVIDENCE_PREFIX}{check}: {error}"),
        cause=_squash(
            f"This host failed the RunPod SDK's start-up fitness check {check}: {error}. "
            + BEFORE_LAUNCH
        ),
        fix="A restart on another host may help; if every host fails it, check the "
        "endpoint's GPU type, container disk and the check's RUNPOD_* limits.",
    )
