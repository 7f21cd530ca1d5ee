"""Turn a ``Prediction`` into the ``Diagnosis`` the rule pack gives for the same cause.

The rule is rendered by the classifier's own ``render_rule`` with the pre-flight's
numbers where vLLM's output would have given captures, so the answer reads the same
whichever path found the failure; the pre-flight adds one sentence with what it measured
and says that vLLM was not started. The failures the pre-flight words itself: a host
that fails the RunPod SDK's fitness checks (``host_fault``), a wedged NVML
(``nvml_fault``); and a hub's definite refusal as the prediction it stands for
(``hub_prediction``).
"""

from __future__ import annotations

from diagnostics import Diagnosis, Evidence, RulePack, State
from diagnostics.classify.classifier import render_rule
from diagnostics.model import Category
from worker.modelinfo.hub import HubRefusal
from worker.preflight.prediction import Prediction
from worker.preflight.request import Request

BEFORE_LAUNCH = "Found by the pre-flight check before launch; vLLM was not started."
EVIDENCE_PREFIX = "pre-flight: "


def _squash(text: str) -> str:
    return " ".join(text.split())


def diagnose(pack: RulePack, rule_id: str, values: dict[str, str], detail: str) -> Diagnosis:
    """The pack's diagnosis for ``rule_id`` with ``values``, marked as found before launch."""
    rendered = render_rule(pack.by_id(rule_id), values, None)
    extra = _squash(f"{detail} {BEFORE_LAUNCH}")
    return rendered._replace(
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


def nvml_fault(error: str) -> Diagnosis:
    """NVML did not answer in time: the GPU driver is wedged; another host may do."""
    return Diagnosis(
        state=State.FAILED_TRANSIENT,
        category=Category.CUDA_FAULT,
        rule="nvml-no-answer",
        evidence=Evidence(0, f"{EVIDENCE_PREFIX}{error}"),
        cause=f"The GPU driver did not answer: {error}. The host is faulty (a wedged "
        f"driver or GPU), so vLLM could not start on it either. {BEFORE_LAUNCH}",
        fix="A restart on another host may help (the worker exits so the platform "
        "retries elsewhere); if every host does this, report the GPU type to RunPod.",
    )


def hub_prediction(refusal: HubRefusal, req: Request) -> Prediction:
    """The hub's definite refusal as the failure vLLM would meet: gated, no such repo or
    no such revision."""
    model = req.model
    if refusal.kind == "gated":
        return Prediction(
            "gated-repo", {"repo": model}, detail=f"The hub answered: {refusal.detail.rstrip('.')}."
        )
    if refusal.kind == "revision-not-found":
        return Prediction(
            "repo-not-found",
            {"model": f"{model}@{req.revision}", "rev": str(req.revision)},
            detail=f"The hub has no revision {req.revision!r} of {model}.",
        )
    where = "" if refusal.detail.startswith("no folder") else "The hub answered: "
    return Prediction(
        "repo-not-found", {"model": model}, detail=f"{where}{refusal.detail.rstrip('.')}."
    )
