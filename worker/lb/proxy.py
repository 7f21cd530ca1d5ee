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
connection, and vLLM aborts the generation. Upstream failures before the answer started
get ``worker.answers``' upstream errors (502/503/504); a failure part-way through a
streamed answer closes the client's connection, so the answer is visibly incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import httpx
import structlog

from worker.lb import bodies
from worker.lb.health import HealthApp, respond
from worker.machine import WorkerState
from worker.proxy import _answer_for
from worker.supervisor import Supervisor

log = structlog.get_logger("worker.lb")

CONNECT_TIMEOUT_S = 10.0
# Below uvicorn's 5 s keep-alive (vLLM's default), so an idle connection is dropped here
# before vLLM drops it and a request is never sent into a closing socket.
KEEPALIVE_EXPIRY_S = 4.0
KEEPALIVE_CONNECTIONS = 100

# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are not forwarded;
# host and content-length are set again for the upstream request.
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_NOT_UPSTREAM = _HOP | {b"host", b"content-length", b"expect"}
_STARTING = frozenset({WorkerState.STARTING, WorkerState.DOWNLOADING, WorkerState.LOADING})
_FAILED = frozenset({WorkerState.FAILED_PERMANENT, WorkerState.FAILED_TRANSIENT})


def upstream_client(port: int, *, request_timeout: float) -> httpx.AsyncClient:
    """The one long-lived client to vLLM at 127.0.0.1:``port``; no pool limit (the
    platform bounds the load), the read timeout is per chunk."""
    client = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        timeout=httpx.Timeout(request_timeout, connect=CONNECT_TIMEOUT_S),
        limits=httpx.Limits(
            max_connections=None,
            max_keepalive_connections=KEEPALIVE_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        ),
        # vLLM is local: an HTTP(S)_PROXY from the environment must not reroute it.
        trust_env=False,
    )
    client.headers.clear()  # send the client's headers, not httpx's defaults
    return client


class ProxyApp:
    """ASGI app for ``PORT``. ``health``: also answer the health path here (when
    ``PORT_HEALTH`` is ``PORT``). ``on_failure_answered`` is called after each answer
    in a failed state (the run loop exits after the first in failed-transient)."""

    def __init__(
        self,
        supervisor: Supervisor,
        client: httpx.AsyncClient,
        *,
        health: HealthApp | None = None,
        on_failure_answered: Callable[[WorkerState], None] = lambda _state: None,
    ) -> None:
        self.supervisor = supervisor
        self.client = client
        self.health = health
        self.on_failure_answered = on_failure_answered

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
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
        headers = [(k, v) for k, v in scope["headers"] if k not in _NOT_UPSTREAM]
        request = self.client.build_request(scope["method"], target, headers=headers, content=body)
        relay = _Relay(self.client, send)
        forward = asyncio.ensure_future(relay.run(request))
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


class _Relay:
    """Sends one request upstream and its answer to the client, chunk by chunk."""

    def __init__(self, client: httpx.AsyncClient, send) -> None:
        self.client = client
        self.send = send
        self.complete = False  # the last chunk is being sent: nothing left to cancel

    async def run(self, request: httpx.Request) -> None:
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self.complete = True
            await respond(self.send, bodies.upstream(_answer_for(exc, mid_stream=False)))
            return
        try:
            await self._relay(response)
        finally:
            await response.aclose()

    async def _relay(self, response: httpx.Response) -> None:
        headers = [(k.lower(), v) for k, v in response.headers.raw if k.lower() not in _HOP]
        await self.send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        try:
            async for chunk in response.aiter_raw():
                await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError as exc:
            # Headers are out: the only honest signal left is closing the connection
            # without the end of the body (the ASGI server does when we return).
            log.warning("lb.upstream_lost", error=f"{type(exc).__name__}: {exc}")
            return
        self.complete = True
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


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
