"""The answer for a start that failed, as both modes give it: a job answer (the queue
mode's handler) or an HTTP body (``worker.lb.bodies``). ``startup_error`` with cause and
fix when permanent, ``prestart_failed`` with the end of vLLM's output when transient.

When vLLM reported running out of KV cache or memory (category kv_cache or oom) and the
start's estimate (``preflight.estimate``) found the model not to fit, the answer adds
what would: the field ``alternatives`` and one sentence at the end of the message (not
repeated when the pre-flight's answer already says it).

And the diagnosis of a configuration judged bad before launch (``config_failure``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from diagnostics import Category, Diagnosis, Evidence, State
from worker.preflight import plan
from worker.seams import answers
from worker.supervision.machine import WorkerState

if TYPE_CHECKING:  # the supervisor's spawn imports config_failure from here
    from worker.supervision.supervisor import Supervisor


def config_failure(var: str, message: str) -> Diagnosis:
    """A configuration judged bad before launch: permanent, names the variable."""
    return Diagnosis(
        state=State.FAILED_PERMANENT,
        category=Category.BAD_CONFIG,
        rule="invalid-setting",
        evidence=Evidence(0, f"environment variable {var}"),
        cause=f"The worker's configuration is invalid: {message}",
        fix=f"Correct {var} on the endpoint and start a new worker; vLLM was not started.",
    )


def _alternatives(supervisor: Supervisor, rule: str | None, category: str) -> dict[str, Any]:
    estimate = supervisor.start_info().get("estimate")
    sentence = plan.advice(estimate, rule, category)
    if sentence is None or not isinstance(estimate, dict):
        return {}
    return {"alternatives": dict(estimate["alternatives"]), "sentence": sentence}


def failure_answer(supervisor: Supervisor) -> dict:
    diagnosis = supervisor.diagnosis
    message = diagnosis.message if diagnosis and diagnosis.message else "vLLM is not running."
    category = str(diagnosis.category) if diagnosis and diagnosis.category else "other"
    rule = diagnosis.rule if diagnosis else None
    extra = _alternatives(supervisor, rule, category) if diagnosis else {}
    sentence = extra.pop("sentence", None)
    if sentence and sentence not in message:
        message = f"{message} {sentence}"
    if supervisor.state is WorkerState.FAILED_PERMANENT:
        return answers.startup_error(message, category=category, rule=rule, **extra)
    return answers.prestart_failed(
        message, supervisor.tail(), category=category, rule=rule, **extra
    )
