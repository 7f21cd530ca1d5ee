"""Turn a ``Prediction`` into the ``Diagnosis`` the rule pack gives for the same cause.

The rule is rendered by the classifier's own ``render_rule`` with the pre-flight's
numbers where vLLM's output would have given captures, so the answer reads the same
whichever path found the failure; the pre-flight adds one sentence with what it measured
and says that vLLM was not started.
"""

from __future__ import annotations

from dataclasses import replace

from diagnostics import Diagnosis, Evidence, RulePack, State
from diagnostics.classify.classifier import render_rule
from diagnostics.model import Category

BEFORE_LAUNCH = "Found by the pre-flight check before launch; vLLM was not started."
EVIDENCE_PREFIX = "pre-flight: "


def _squash(text: str) -> str:
    return " ".join(text.split())


def diagnose(pack: RulePack, rule_id: str, values: dict[str, str], detail: str) -> Diagnosis:
    """The pack's diagnosis for ``rule_id`` with ``values``, marked as found before launch."""
    rendered = render_rule(pack.by_id(rule_id), values, None)
    extra = _squash(f"{detail} {BEFORE_LAUNCH}")
    return replace(
        rendered,
        evidence=Evidence(0, EVIDENCE_PREFIX + _squash(detail or rendered.cause or "")),
        cause=f"{rendered.cause} {extra}",
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
