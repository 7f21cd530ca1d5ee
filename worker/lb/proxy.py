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

The request body is read whole before it is sent on (requests to vLLM are JSON or small
uploads); the response is not. While a request is in flight a second task waits for the
client to go away: a disconnect cancels the upstream request, which closes its
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
from worker.lb.upstream import HOP, Relay, Upstream
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
    ) -> None:
        self.supervisor = supervisor
        self.upstream = upstream
        self.health = health
        self.on_failure_answered = on_failure_answered

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
        body = await _read_body(receive)
        if body is None:  # the client left before sending its whole request
            return
        target = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k not in _NOT_UPSTREAM
        ]
        relay = Relay(self.upstream, send)
        forward = asyncio.ensure_future(relay.run(scope["method"], target, headers, body))
        gone = asyncio.ensure_future(_disconnected(receive))
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


async def _read_body(receive) -> bytes | None:
    """The whole request body, or None when the client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive) -> None:
    """Returns when the client has gone (or the response is complete)."""
    while (await receive())["type"] != "http.disconnect":
        pass
