"""The ASGI app on ``PORT``: pass everything to vLLM when ready, answer for it otherwise.

=================================== ==================================================
state                               every request gets
=================================== ==================================================
ready                               vLLM's answer: any method and path, query string,
                                    headers and status kept, the body streamed through
                                    chunk by chunk as it arrives (never buffered)
starting, downloading, loading      503, ``Retry-After``, ``type: not_ready`` and the
                                    phase
failed-permanent                    503 and the diagnosis (``type: startup_error``)
failed-transient                    503 and the diagnosis (``type: prestart_failed``
                                    with the end of vLLM's output); the run loop then
                                    exits non-zero
stopped                             503, ``type: shutting_down``
=================================== ==================================================

The request body is streamed to vLLM as it arrives (never held whole; uvicorn stops
reading the client past 64 KiB not yet taken), with its ``Content-Length`` when the client
gave one, and bounded (``worker.lb.mode.Limits``): a declared length over
``body_bytes`` is answered 413 before anything is sent; a chunked body that grows past it
is cut (413) and so is one that stalls for ``body_timeout_s`` (408): the upstream request
is dropped, which vLLM sees as a client gone. Once the body is in, a second task waits
for the client to go away: a disconnect cancels the upstream request, which closes its
connection (vLLM's signal to abort the generation). Upstream failures before the answer
started get ``worker.seams.answers``' upstream errors (502/503/504); a failure part-way through
a streamed answer closes the client's connection, so the answer is visibly incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from worker.lb import bodies
from worker.lb.health import HealthApp, respond
from worker.lb.mode import Limits
from worker.lb.upstream import HOP, Relay, RequestBody, Upstream
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

log = structlog.get_logger("worker.lb")

# Set again for the upstream request (host, content-length) or answered here (expect).
_NOT_UPSTREAM = HOP | {b"host", b"content-length", b"expect"}
_STARTING = frozenset({WorkerState.STARTING, WorkerState.DOWNLOADING, WorkerState.LOADING})
_FAILED = frozenset({WorkerState.FAILED_PERMANENT, WorkerState.FAILED_TRANSIENT})


class ProxyApp:
    """ASGI app for ``PORT``. ``health``: also answer the health path here (when
    ``PORT_HEALTH`` is ``PORT``). ``on_failure_answered`` is called after each answer
    in a failed state (the run loop exits after the first in failed-transient)."""

    def __init__(
        self,
        supervisor: Supervisor,
        upstream: Upstream,
        *,
        health: HealthApp | None = None,
        on_failure_answered: Callable[[WorkerState], None] = lambda _state: None,
        limits: Limits | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.upstream = upstream
        self.health = health
        self.on_failure_answered = on_failure_answered
        self.limits = limits or Limits()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        if not _origin_form(scope):
            # ``*``, ``*@host:port/...``, ``host:port``: never relayed, never a 500.
            log.info("lb.target_refused", method=scope["method"])
            await respond(send, bodies.bad_target())
            return
        if self.health is not None and scope["path"] == self.health.path:
            await self.health(scope, receive, send)
            return
        state = self.supervisor.state
        if state is WorkerState.READY:
            await self._forward(scope, receive, send)
        elif state in _STARTING:
            await respond(send, bodies.not_ready(state))
        elif state in _FAILED:
            await respond(send, bodies.failure(self.supervisor))
            log.info("lb.failure_answered", state=state.value, path=scope["path"])
            self.on_failure_answered(state)
        else:
            await respond(send, bodies.stopping())

    async def _forward(self, scope, receive, send) -> None:
        limits = self.limits
        length, chunked = _declared_body(scope["headers"])
        if length is not None and length > limits.body_bytes:
            log.info("lb.body_refused", declared=length, limit=limits.body_bytes)
            await respond(send, bodies.body_too_large(limits.body_bytes))
            return
        body = None
        if chunked or length:
            body = RequestBody(receive, limits.body_bytes, limits.body_timeout_s)
        target = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k not in _NOT_UPSTREAM
        ]
        if length and not chunked:
            headers.append(("Content-Length", str(length)))
        relay = Relay(self.upstream, send)
        forward = asyncio.ensure_future(relay.run(scope["method"], target, headers, body))
        gone = asyncio.ensure_future(_disconnected(receive, body))
        try:
            await asyncio.wait((forward, gone), return_when=asyncio.FIRST_COMPLETED)
            if not forward.done() and not relay.complete:
                log.info("lb.client_gone", method=scope["method"], path=scope["path"])
                forward.cancel()
        finally:
            gone.cancel()
            if not forward.done() and not relay.complete:
                forward.cancel()  # this handler itself was cancelled (shutdown timeout)
            with contextlib.suppress(asyncio.CancelledError):
                await forward


def _origin_form(scope) -> bool:
    """Whether the request target is a path (``/...``), the only form relayed to vLLM."""
    raw = scope.get("raw_path") or scope["path"].encode("latin-1", "replace")
    return raw.startswith(b"/") and not raw.startswith(b"//")


def _declared_body(headers) -> tuple[int | None, bool]:
    """(Content-Length, chunked) as the client declared them (httptools has checked that
    a length is a number and that not both are given)."""
    length, chunked = None, False
    for name, value in headers:
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                length = int(value)
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked


async def _disconnected(receive, body: RequestBody | None) -> None:
    """Returns when the client has gone (or the response is complete); watches only once
    the body was read (until then the body's reader sees a disconnect)."""
    if body is not None:
        await body.done.wait()
        if body.gone:
            return
    while (await receive())["type"] != "http.disconnect":
        pass
