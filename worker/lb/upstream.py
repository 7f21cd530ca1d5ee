"""The one long-lived HTTP client to vLLM, and the one place its exceptions become answers.

An ``Upstream`` holds one ``aiohttp.ClientSession`` (a pool of keep-alive connections to
127.0.0.1:VLLM_PORT, no limit: the platform bounds the load). ``Relay.run`` sends one
request and passes the answer to the ASGI ``send`` as it arrives: status, headers (less
hop-by-hop ones) and body chunks, never buffered, bytes untouched (no decompression).

Why aiohttp and not httpx: with httpx the proxy added 1.7 ms at p50 to a 1-token
completion, with aiohttp 0.4 ms (target: 1 ms; ``bench/lb_proxy_bench.py``,
``docs/benchmarks.md`` §5). aiohttp is the runpod SDK's own HTTP client, so it adds no
dependency.

How aiohttp's exceptions are answered before the answer started (after that, the
client's connection is closed without the end of the body: visibly incomplete)::

    aiohttp.ClientError
    ├── ClientConnectorError, ConnectionTimeoutError  -> answers.upstream_unreachable (503)
    ├── ServerTimeoutError (and asyncio's TimeoutError) -> answers.upstream_timeout   (504)
    └── everything else (ServerDisconnectedError,
        ClientPayloadError, ClientOSError, ...)        -> answers.upstream_lost      (502)
"""

from __future__ import annotations

import aiohttp
import structlog
from yarl import URL

from worker import answers
from worker.lb import bodies
from worker.lb.health import respond

log = structlog.get_logger("worker.lb")

CONNECT_TIMEOUT_S = 10.0
# Below uvicorn's 5 s keep-alive (vLLM's default), so an idle connection is dropped here
# before vLLM drops it and a request is never sent into a closing socket.
KEEPALIVE_EXPIRY_S = 4.0

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


class Upstream:
    """vLLM at 127.0.0.1:``port``. Build it inside the running event loop."""

    def __init__(self, port: int, *, request_timeout: float) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_EXPIRY_S
            ),
            # The read limit is per chunk: a long stream is fine while it moves.
            timeout=aiohttp.ClientTimeout(
                total=None, connect=CONNECT_TIMEOUT_S, sock_read=request_timeout
            ),
            auto_decompress=False,
            skip_auto_headers=_NO_AUTO_HEADERS,
            cookie_jar=aiohttp.DummyCookieJar(),  # callers' cookies are not ours to keep
            trust_env=False,  # vLLM is local: an HTTP(S)_PROXY must not reroute it
        )

    async def aclose(self) -> None:
        await self.session.close()


class Relay:
    """One request upstream and its answer to the client, chunk by chunk. ``complete``
    turns true when nothing is left to cancel (the last chunk is on its way)."""

    def __init__(self, upstream: Upstream, send) -> None:
        self.upstream = upstream
        self.send = send
        self.complete = False

    async def run(self, method: str, target: str, headers: list, body: bytes) -> None:
        url = URL(self.upstream.base + target, encoded=True)  # the path as the caller sent it
        try:
            response = await self.upstream.session.request(
                method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.complete = True
            await respond(self.send, bodies.upstream(_answer_for(exc)))
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
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Headers are out: the only honest signal left is closing the connection
            # without the end of the body (the ASGI server does when we return).
            log.warning("lb.upstream_lost", error=f"{type(exc).__name__}: {exc}")
            response.close()
            return
        self.complete = True
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


def _answer_for(exc: BaseException) -> dict:
    """The one translation from an aiohttp exception to an error answer."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return answers.upstream_unreachable(detail)
    if isinstance(exc, TimeoutError):  # ServerTimeoutError is one too
        return answers.upstream_timeout(detail)
    return answers.upstream_lost(detail, mid_stream=False)
