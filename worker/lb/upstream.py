"""The load-balancing relay: one request to vLLM, its answer to the ASGI client as it comes.

An ``Upstream`` holds one ``aiohttp.ClientSession`` (a pool of keep-alive connections to
127.0.0.1:VLLM_PORT, no limit: the platform bounds the load). ``Relay.run`` sends one
request and passes the answer to the ASGI ``send`` as it arrives: status, headers (less
hop-by-hop ones) and body chunks, never buffered, bytes untouched (no decompression).

The session and the translation of aiohttp's exceptions into answers are
``worker.seams.upstream``'s (shared with the queue-mode proxy). An exception before the answer
started is answered with its error body; after that, the client's connection is closed
without the end of the body: visibly incomplete.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import structlog
from yarl import URL

from worker.lb import bodies
from worker.lb.health import respond
from worker.seams.upstream import UPSTREAM_ERRORS, answer_for, open_session

log = structlog.get_logger("worker.lb")

# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are not forwarded.
HOP = frozenset(
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
# aiohttp would add these when the caller did not send them: a proxy adds nothing.
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")


UPSTREAM_HOST = "127.0.0.1"


class NotOriginForm(ValueError):
    """A request target that is not a path starting with ``/`` (asterisk form, authority
    form, userinfo...): it is never sent anywhere."""


def upstream_url(port: int, target: str) -> URL:
    """The URL for ``target`` (origin form: ``/path?query`` as the client sent it) on vLLM
    at 127.0.0.1:``port``, built from parts, never by concatenation: a target that is not
    a path (``*@host:port/...``, ``host:port``, ``//host``...) raises ``NotOriginForm``,
    and the built URL's host and port are checked before anything is sent."""
    if not target.startswith("/") or target.startswith("//"):
        raise NotOriginForm(target[:64])
    path, _, query = target.partition("?")
    url = URL.build(
        scheme="http",
        host=UPSTREAM_HOST,
        port=port,
        path=path,
        query_string=query,
        encoded=True,  # the path as the caller sent it
    )
    if url.host != UPSTREAM_HOST or url.port != port or url.user is not None:
        raise NotOriginForm(target[:64])
    return url


class Upstream:
    """vLLM at 127.0.0.1:``port``. Build it inside the running event loop."""

    def __init__(self, port: int, *, request_timeout: float) -> None:
        self.port = port
        self.base = f"http://{UPSTREAM_HOST}:{port}"
        # No connection limit: the platform bounds the load.
        self.session = open_session(
            request_timeout=request_timeout,
            auto_decompress=False,  # bytes pass untouched
            skip_auto_headers=_NO_AUTO_HEADERS,
        )

    async def aclose(self) -> None:
        await self.session.close()


class BodyCut(Exception):
    """The request body was cut short here (too large, stalled, or its client left)."""


class RequestBody:
    """A request body read from the ASGI ``receive`` as vLLM takes it, bounded: more than
    ``max_bytes`` or ``timeout_s`` without a byte cuts it (``error``: the answer to give);
    a client gone cuts it too (``gone``). ``done`` is set once it is read or cut."""

    def __init__(self, receive, max_bytes: int, timeout_s: float) -> None:
        self.receive = receive
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.error: bodies.Answer | None = None
        self.gone = False
        self.done = asyncio.Event()
        self.size = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while True:
                try:
                    message = await asyncio.wait_for(self.receive(), self.timeout_s)
                except TimeoutError:
                    self.error = bodies.body_timeout(self.timeout_s)
                    raise BodyCut("stalled") from None
                if message["type"] == "http.disconnect":
                    self.gone = True
                    raise BodyCut("client gone")
                chunk = message.get("body", b"")
                self.size += len(chunk)
                if self.size > self.max_bytes:
                    self.error = bodies.body_too_large(self.max_bytes)
                    raise BodyCut("too large")
                if chunk:
                    yield chunk
                if not message.get("more_body", False):
                    return
        finally:
            self.done.set()


_SEND_ERRORS: tuple[type[BaseException], ...] = (*UPSTREAM_ERRORS, BodyCut)


class Relay:
    """One request upstream and its answer to the client, chunk by chunk. ``complete``
    turns true when nothing is left to cancel (the last chunk is on its way)."""

    def __init__(self, upstream: Upstream, send) -> None:
        self.upstream = upstream
        self.send = send
        self.complete = False

    async def run(self, method: str, target: str, headers: list, body: RequestBody | None) -> None:
        """Send the request (``body`` streamed; None: no body) and relay the answer."""
        url = upstream_url(self.upstream.port, target)  # raises before anything is sent
        try:
            response = await self.upstream.session.request(
                method,
                url,
                headers=headers,
                data=body.chunks() if body is not None else None,
                allow_redirects=False,
            )
        except _SEND_ERRORS as exc:
            self.complete = True
            if body is not None and body.gone:
                return  # nobody to answer
            if body is not None and body.error is not None:
                log.info("lb.body_cut", status=body.error.status, bytes=body.size)
                await respond(self.send, body.error)
            else:
                await respond(self.send, bodies.upstream(answer_for(exc)))
            return
        try:
            await self._relay(response)
        except BaseException:
            response.close()  # drops the connection: vLLM sees the client go and aborts
            raise
        response.release()

    async def _relay(self, response: aiohttp.ClientResponse) -> None:
        headers = [(k.lower(), v) for k, v in response.raw_headers if k.lower() not in HOP]
        await self.send(
            {"type": "http.response.start", "status": response.status, "headers": headers}
        )
        try:
            async for chunk in response.content.iter_any():
                await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
        except UPSTREAM_ERRORS as exc:
            # Headers are out: the only honest signal left is closing the connection
            # without the end of the body (the ASGI server does when we return).
            log.warning("lb.upstream_lost", error=f"{type(exc).__name__}: {exc}")
            response.close()
            return
        self.complete = True
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
