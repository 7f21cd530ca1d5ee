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
    text = json.dumps({"error": payload}, ensure_ascii=False, default=str)
    # A lone surrogate (an undecodable byte that reached a message) becomes its JSON
    # escape, never a UnicodeEncodeError: the answer is always sent.
    return Answer(status, [*_JSON, *(headers or [])], text.encode("utf-8", "backslashreplace"))


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


# The answers the HTTP server gives before (or instead of) the app: the connection is
# closed after each (``close``), as the request may not have been read whole.
def _refusal(status: int, message: str, type_: str = "invalid_request_error") -> Answer:
    payload = answers.error_payload(message, type_, status)
    return _answer(status, payload, [(b"connection", b"close")])


def headers_too_large(max_bytes: int, max_count: int) -> Answer:
    """431: the request line and headers went over their size or count."""
    return _refusal(
        431,
        f"The request's headers are too large: at most {max_bytes} bytes and {max_count} headers.",
    )


def header_timeout(timeout_s: float) -> Answer:
    """408: the request line and headers did not arrive within LB_HEADER_TIMEOUT."""
    return _refusal(
        408, f"The request's headers did not arrive within {timeout_s:g} s (LB_HEADER_TIMEOUT)."
    )


def body_timeout(timeout_s: float) -> Answer:
    """408: the request body stalled for LB_BODY_TIMEOUT."""
    return _refusal(
        408,
        f"The request body stopped arriving for {timeout_s:g} s (LB_BODY_TIMEOUT); "
        "the request was not completed.",
    )


def body_too_large(max_bytes: int) -> Answer:
    """413: the request body is larger than LB_MAX_BODY_BYTES."""
    return _refusal(413, f"The request body is larger than {max_bytes} bytes (LB_MAX_BODY_BYTES).")


def bad_request() -> Answer:
    """400: bytes that are not an HTTP/1.1 request."""
    return _refusal(400, "The request is not valid HTTP/1.1.")


def too_many_connections(limit: int) -> Answer:
    """503: the port holds as many connections as it may (LB_MAX_CONNECTIONS, or the
    file-descriptor limit); retry, on another worker."""
    payload = answers.error_payload(
        f"This worker holds {limit} connections, its limit; retry.", "overloaded", 503
    )
    retry = str(RETRY_AFTER_STOPPING_S).encode()
    return _answer(503, payload, [(b"retry-after", retry), (b"connection", b"close")])
