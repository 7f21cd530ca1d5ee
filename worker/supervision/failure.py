"""The answer for a start that failed, as both modes give it: a job answer (the queue
mode's handler) or an HTTP body (``worker.lb.bodies``). ``startup_error`` with cause and
fix when permanent, ``prestart_failed`` with the end of vLLM's output when transient."""

from __future__ import annotations

from worker.seams import answers
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor


def failure_answer(supervisor: Supervisor) -> dict:
    diagnosis = supervisor.diagnosis
    message = diagnosis.message if diagnosis and diagnosis.message else "vLLM is not running."
    category = str(diagnosis.category) if diagnosis and diagnosis.category else "other"
    rule = diagnosis.rule if diagnosis else None
    if supervisor.state is WorkerState.FAILED_PERMANENT:
        return answers.startup_error(message, category=category, rule=rule)
    return answers.prestart_failed(message, supervisor.tail(), category=category, rule=rule)
