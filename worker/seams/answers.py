"""Every error answer a job can get, built in one place.

Owns the shape of error answers; pure (no I/O, no env reads). Callers pass messages
that are already safe to show: nothing here adds environment values or secrets.

Why the error is a JSON *string*: in runpod 1.12.0 a handler that yields (or returns) a
dict with a truthy ``error`` key ends the job with ``{"error": str(value)}``, so a dict
value would reach the client as a Python repr. ``error_output`` therefore encodes the
OpenAI-style error object with ``json.dumps``; clients ``json.loads`` it back.

Error ``type`` values and when they are used:

* ``invalid_request_error`` (code 400): the job input matches no accepted shape.
* vLLM's own type (code = vLLM's): vLLM answered 4xx/5xx; its message and type pass
  through; ``upstream_http_error`` when its body has no OpenAI-style error object.
* ``upstream_error`` (code 502/503/504): vLLM could not be reached, dropped the
  connection (possibly mid-stream), timed out, or sent a body that is not JSON.
* ``startup_error`` (code null): vLLM failed to start in a way a restart will not fix.
* ``prestart_failed`` (code null): vLLM failed to start, maybe transiently; carries the
  last lines of its output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = [
    "bad_input",
    "error_output",
    "error_payload",
    "prestart_failed",
    "startup_error",
    "upstream_bad_body",
    "upstream_http_error",
    "upstream_lost",
    "upstream_timeout",
    "upstream_unreachable",
]

# How much of a non-JSON upstream body to quote: enough to read, bounded for the queue.
_MAX_QUOTED_BODY = 2000
# Output lines a prestart failure carries at most.
MAX_TAIL_LINES = 200


def error_payload(message: str, type_: str, code: int | str | None = None, **extra: Any) -> dict:
    """The OpenAI-style error object ``{"message", "type", "code"}`` plus ``extra`` fields."""
    return {"message": message, "type": type_, "code": code, **extra}


def error_output(payload: dict) -> dict:
    """What a handler yields or returns to fail the job with ``payload`` as a JSON string."""
    return {"error": json.dumps(payload, ensure_ascii=False, default=str)}


def bad_input(message: str) -> dict:
    """The job input could not be mapped to a request (see ``worker.queue.jobs.BadInput``)."""
    return error_output(error_payload(message, "invalid_request_error", 400))


def upstream_http_error(status: int, body: bytes | str | object) -> dict:
    """vLLM answered ``status`` (not 2xx) with ``body``: pass its own error through.

    ``body`` may be raw bytes/text or an already-parsed JSON value. vLLM's shape is
    ``{"error": {"message", "type", "param", "code"}}`` (older releases put those fields
    at the top level); FastAPI's bare ``{"detail": ...}`` and non-JSON bodies are
    handled too.
    """
    parsed = _parse(body)
    extra: dict[str, Any] = {"status": status}
    obj = _error_object(parsed)
    if obj is not None:
        type_ = obj.get("type") if isinstance(obj.get("type"), str) else None
        code = obj.get("code") if isinstance(obj.get("code"), int | str) else status
        if obj.get("param") is not None:
            extra["param"] = obj["param"]
        return error_output(
            error_payload(obj["message"], type_ or "upstream_http_error", code, **extra)
        )
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        message = parsed["error"]
    elif isinstance(parsed, dict) and "detail" in parsed:
        detail = parsed["detail"]
        message = detail if isinstance(detail, str) else json.dumps(detail, default=str)
    else:
        message = f"vLLM answered HTTP {status}: {_quote(body)}"
    return error_output(error_payload(message, "upstream_http_error", status, **extra))


def upstream_unreachable(detail: str) -> dict:
    """No connection to vLLM could be made (not listening, refused, connect timeout)."""
    return _upstream("vLLM could not be reached.", 503, detail)


def upstream_lost(detail: str, *, mid_stream: bool = False) -> dict:
    """vLLM closed the connection before the answer was complete."""
    where = " in the middle of a streamed answer" if mid_stream else ""
    return _upstream(
        f"The connection to vLLM was lost{where}; the answer is incomplete.", 502, detail
    )


def upstream_timeout(detail: str) -> dict:
    """vLLM did not answer within the request timeout."""
    return _upstream("vLLM did not answer within the request timeout.", 504, detail)


def upstream_bad_body(status: int, body: bytes | str) -> dict:
    """vLLM answered 2xx with a body that is not JSON."""
    return _upstream(
        f"vLLM answered HTTP {status} with a body that is not JSON.", 502, _quote(body)
    )


def startup_error(message: str, *, category: str, rule: str | None, **extra: Any) -> dict:
    """vLLM failed to start and will fail the same way again (failed-permanent)."""
    return error_output(
        error_payload(message, "startup_error", None, category=category, rule=rule, **extra)
    )


def prestart_failed(message: str, tail: Sequence[str], **extra: Any) -> dict:
    """vLLM failed to start, perhaps transiently (failed-transient); ``tail`` is its last output.

    Only the last ``MAX_TAIL_LINES`` lines are kept.
    """
    lines = list(tail)[-MAX_TAIL_LINES:]
    return error_output(error_payload(message, "prestart_failed", None, tail=lines, **extra))


def _upstream(message: str, code: int, detail: str) -> dict:
    return error_output(error_payload(message, "upstream_error", code, detail=detail))


def _error_object(parsed: object) -> dict | None:
    """vLLM's error object: ``{"error": {...}}`` now, a top-level ``{"object": "error"}`` before."""
    if not isinstance(parsed, dict):
        return None
    for candidate in (parsed.get("error"), parsed):
        if isinstance(candidate, dict) and isinstance(candidate.get("message"), str):
            return candidate
    return None


def _parse(body: bytes | str | object) -> object:
    if not isinstance(body, bytes | str):
        return body
    try:
        return json.loads(body)
    except ValueError:  # includes UnicodeDecodeError
        return None


def _quote(body: bytes | str | object) -> str:
    if isinstance(body, bytes):
        text = body.decode("utf-8", errors="replace")
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body, default=str)
    text = text.strip() or "(empty body)"
    if len(text) > _MAX_QUOTED_BODY:
        text = text[:_MAX_QUOTED_BODY] + f"... ({len(text) - _MAX_QUOTED_BODY} more characters)"
    return text
