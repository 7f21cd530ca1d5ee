"""Map a RunPod job's ``input`` to one HTTP request for vLLM's OpenAI-compatible server.

Owns the accepted input shapes and their validation. Pure: no I/O, no env reads, no
runpod or httpx; the proxy sends what this module returns.

Accepted shapes (all under ``job["input"]``; keys outside a shape's set are rejected):

* OpenAI passthrough, as RunPod's ``/openai/...`` gateway sends it::

      {"openai_route": "/v1/chat/completions", "openai_input": {...}}   -> POST
      {"openai_route": "/v1/models"}  (no, null or empty openai_input)   -> GET

* Generic::

      {"route": "/v1/...", "method": "GET" | "POST", "body": {...}}

  ``method`` defaults to POST with a body and GET without; a GET takes no body.

* Standard::

      {"messages": [...], "sampling_params": {...}, "stream": bool}     -> POST /v1/chat/completions
      {"prompt": "...", "sampling_params": {...}, "stream": bool}       -> POST /v1/completions
      {"prompt": "...", "apply_chat_template": true, ...}               -> one user message, chat

  ``messages`` win over ``prompt``. Sampling options (``max_tokens``, ``temperature`` ...)
  go only in ``sampling_params``, which is merged into the body as is.

Routes: a plain absolute path under ``/v1/`` made of segments of ``[A-Za-z0-9._~-]``; no
``.``/``..`` segments, empty segments, scheme, host, query string, fragment or
percent-encoding. vLLM's OpenAI routes take everything in the body, so a query string
is refused rather than sanitised.

Every POST body gets ``model`` set to the served model when it has none, and is checked
to be strict JSON (no NaN/Infinity) so the proxy can always encode it.

Whether a POST streams is decided as vLLM's request models will read the body's
``stream`` (``bool | None`` in pydantic's lax mode: ``1``, ``"yes"``, ``"on"`` are
true); a value pydantic refuses is sent unchanged and vLLM answers it with a 400.

Messages are bounded whatever the input: at most ``_MAX_NAMES`` key names, each cut to
``_MAX_NAME`` characters, so an input with 300,000 keys gets a short answer (and a short
log line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from worker.queue.take_body import json_name

__all__ = ["ACCEPTED_SHAPES", "BadInput", "ProxyRequest", "to_request"]

ACCEPTED_SHAPES = (
    'Accepted input shapes: {"openai_route": "/v1/...", "openai_input": {...}}; '
    '{"route": "/v1/...", "method": "GET"|"POST", "body": {...}}; '
    '{"messages": [...], "sampling_params": {...}, "stream": true|false}; '
    '{"prompt": "...", "sampling_params": {...}, "stream": true|false, '
    '"apply_chat_template": true|false}.'
)

_ROUTE = re.compile(r"/v1(?:/[A-Za-z0-9._~-]+)+")
_MAX_ROUTE_LENGTH = 256

_OPENAI_KEYS = frozenset({"openai_route", "openai_input"})
_GENERIC_KEYS = frozenset({"route", "method", "body"})
_STANDARD_KEYS = frozenset(
    {"prompt", "messages", "sampling_params", "stream", "apply_chat_template"}
)
# Keys the standard shape sets itself; taking them from sampling_params would be ambiguous.
_RESERVED_SAMPLING_KEYS = frozenset({"prompt", "messages", "stream"})
_METHODS = ("GET", "POST")
_MAX_NAMES = 20
_MAX_NAME = 64
# vLLM's request models declare ``stream: bool | None = False``.
_STREAM_FIELD: TypeAdapter[bool | None] = TypeAdapter(bool | None)


class BadInput(ValueError):
    """Raised when a job's input matches no accepted shape or has a wrong value.

    ``problem`` says what was wrong; ``message`` (also ``str(exc)``) adds the list of
    accepted shapes and is what the job's error answer carries.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.message = f"{problem} {ACCEPTED_SHAPES}"
        super().__init__(self.message)


@dataclass(frozen=True)
class ProxyRequest:
    """One request for vLLM: ``path`` is relative to its base URL; ``body`` is JSON or None."""

    method: Literal["GET", "POST"]
    path: str
    body: dict[str, Any] | None
    stream: bool


def to_request(job_input: object, served_model: str) -> ProxyRequest:
    """Return the request for ``job_input``; raise BadInput if it cannot be served."""
    if not isinstance(job_input, Mapping):
        raise BadInput(f"The job input must be a JSON object, got {json_name(job_input)}.")
    keys = set(job_input)
    if "openai_route" in keys:
        _only(keys, _OPENAI_KEYS, "the openai_route shape")
        return _openai(job_input, served_model)
    if "route" in keys:
        _only(keys, _GENERIC_KEYS, "the route shape")
        return _generic(job_input, served_model)
    if "messages" in keys or "prompt" in keys:
        _only(keys, _STANDARD_KEYS, "the prompt/messages shape")
        return _standard(job_input, served_model)
    found = _names(keys) or "none"
    raise BadInput(
        f"The job input has none of openai_route, route, messages or prompt (keys found: {found})."
    )


def _openai(job_input: Mapping[str, Any], served_model: str) -> ProxyRequest:
    path = _route(job_input["openai_route"], "openai_route")
    body = job_input.get("openai_input")
    if body is not None and not isinstance(body, dict):
        raise BadInput(f"openai_input must be a JSON object, got {json_name(body)}.")
    if not body:
        return ProxyRequest("GET", path, None, stream=False)
    return _post(path, body, served_model)


def _generic(job_input: Mapping[str, Any], served_model: str) -> ProxyRequest:
    path = _route(job_input["route"], "route")
    body = job_input.get("body")
    if body is not None and not isinstance(body, dict):
        raise BadInput(f"body must be a JSON object, got {json_name(body)}.")
    method = job_input.get("method")
    if method is None:
        method = "GET" if body is None else "POST"
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise BadInput(f"method must be one of {', '.join(_METHODS)}, got {_show(method)}.")
    if method.upper() == "GET":
        if body is not None:
            raise BadInput("A GET request takes no body; use method POST or drop body.")
        return ProxyRequest("GET", path, None, stream=False)
    if body is None:
        return ProxyRequest("POST", path, None, stream=False)
    return _post(path, body, served_model)


def _standard(job_input: Mapping[str, Any], served_model: str) -> ProxyRequest:
    sampling = job_input.get("sampling_params", {})
    if not isinstance(sampling, dict):
        raise BadInput(f"sampling_params must be a JSON object, got {json_name(sampling)}.")
    reserved = sorted(_RESERVED_SAMPLING_KEYS & set(sampling))
    if reserved:
        raise BadInput(
            f"sampling_params must not contain {', '.join(reserved)}; "
            "give them as top-level input keys."
        )
    stream = job_input.get("stream", False)
    if not isinstance(stream, bool):
        raise BadInput(f"stream must be true or false, got {json_name(stream)}.")
    as_chat = job_input.get("apply_chat_template", False)
    if not isinstance(as_chat, bool):
        raise BadInput(f"apply_chat_template must be true or false, got {json_name(as_chat)}.")

    body: dict[str, Any] = dict(sampling)
    if "messages" in job_input:
        messages = job_input["messages"]
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadInput(
                f"messages must be a list of message objects, got {json_name(messages)}."
            )
        path = "/v1/chat/completions"
        body["messages"] = messages
    else:
        prompt = job_input["prompt"]
        if not isinstance(prompt, str):
            raise BadInput(f"prompt must be a string, got {json_name(prompt)}.")
        if as_chat:
            path = "/v1/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            path = "/v1/completions"
            body["prompt"] = prompt
    if stream:
        body["stream"] = True
    return _post(path, body, served_model)


def _post(path: str, body: dict[str, Any], served_model: str) -> ProxyRequest:
    body = dict(body)  # never mutate the job's own input
    if body.get("model") is None:
        body["model"] = served_model
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise BadInput(f"The request body is not strict JSON ({exc}).") from exc
    return ProxyRequest("POST", path, body, stream=streams(body.get("stream")))


def streams(value: object) -> bool:
    """Whether vLLM will stream a request whose body has ``"stream": value``."""
    try:
        return bool(_STREAM_FIELD.validate_python(value))
    except ValidationError:
        return False  # vLLM refuses the request with a 400, as one JSON answer


def _route(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{key} must be a string path under /v1/, got {json_name(value)}.")
    if (
        len(value) > _MAX_ROUTE_LENGTH
        or not _ROUTE.fullmatch(value)
        or any(part in (".", "..") for part in value.split("/"))
    ):
        raise BadInput(
            f"{key} must be a plain path under /v1/ such as /v1/chat/completions "
            f"(no query string, '..' or host), got {_show(value)}."
        )
    return value


def _only(keys: set[Any], allowed: frozenset[str], shape: str) -> None:
    extra = keys - allowed
    if extra:
        names = _names(extra)
        hint = ""
        if shape == "the prompt/messages shape":
            hint = " Sampling options such as max_tokens go inside sampling_params."
        raise BadInput(
            f"Unexpected key(s) for {shape}: {names}; it takes only "
            f"{', '.join(sorted(allowed))}.{hint}"
        )


def _names(keys: set[Any]) -> str:
    """Up to ``_MAX_NAMES`` key names, sorted, each cut short; how many more there were."""
    shown = []
    for key in sorted(map(str, keys))[:_MAX_NAMES]:
        shown.append(key if len(key) <= _MAX_NAME else key[:_MAX_NAME] + "...")
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _show(value: object, limit: int = 80) -> str:
    text = json.dumps(value) if isinstance(value, str) else json_name(value)
    return text if len(text) <= limit else text[:limit] + "..."
