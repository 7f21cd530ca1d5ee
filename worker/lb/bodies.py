"""Every answer the load-balancing worker gives itself, as an HTTP status, headers and
an OpenAI-style JSON body ``{"error": {...}}``.

The diagnosis is the queue mode's, built by the same code (``worker.supervision.failure``
and ``worker.seams.answers``): a job answer carries the error object as JSON text under
``"error"``, an HTTP answer carries the same object under ``"error"``.
Pure: reads the supervisor's state, does no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from worker.seams import answers
from worker.supervision.failure import failure_answer
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

# What a caller should wait before retrying a worker that is still starting. vLLM's
# phases take tens of seconds to minutes; 5 s keeps the first answer close to ready.
RETRY_AFTER_S = 5
# A worker that is stopping: another worker should take the retry.
RETRY_AFTER_STOPPING_S = 1

Headers = list[tuple[bytes, bytes]]
_JSON: Headers = [(b"content-type", b"application/json")]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Headers
    body: bytes


def _answer(status: int, payload: dict, headers: Headers | None = None) -> Answer:
    body = json.dumps({"error": payload}, ensure_ascii=False, default=str).encode()
    return Answer(status, [*_JSON, *(headers or [])], body)


def _from_job_answer(job_answer: dict) -> dict:
    """The error object a job answer carries as JSON text."""
    return json.loads(job_answer["error"])


def not_ready(state: WorkerState) -> Answer:
    """vLLM is starting, downloading or loading: 503, retry later."""
    payload = answers.error_payload(
        f"The model is not ready yet (vLLM is {state.value}); retry after {RETRY_AFTER_S} s.",
        "not_ready",
        503,
        phase=state.value,
    )
    return _answer(503, payload, [(b"retry-after", str(RETRY_AFTER_S).encode())])


def stopping() -> Answer:
    """The worker is shutting down: 503, retry (on another worker)."""
    payload = answers.error_payload(
        "This worker is shutting down; retry.", "shutting_down", 503, phase="stopped"
    )
    return _answer(503, payload, [(b"retry-after", str(RETRY_AFTER_STOPPING_S).encode())])


def failure(supervisor: Supervisor) -> Answer:
    """vLLM failed to start: the queue mode's diagnosis (``startup_error`` when
    permanent, ``prestart_failed`` with the end of vLLM's output when transient), 503."""
    return _answer(503, _from_job_answer(failure_answer(supervisor)))


def upstream(job_answer: dict) -> Answer:
    """vLLM could not be reached or did not answer (``worker.seams.answers.upstream_*``); the
    HTTP status is the error's code (502, 503 or 504)."""
    payload = _from_job_answer(job_answer)
    code = payload.get("code")
    return _answer(code if isinstance(code, int) else 502, payload)


def bad_target() -> Answer:
    """A request target that is not a path (``OPTIONS *``, ``*@host:port/...``,
    authority form): 400, never relayed."""
    payload = answers.error_payload(
        "The request target must be a path starting with '/'.", "invalid_request_error", 400
    )
    return _answer(400, payload)
