"""The worker's HTTP client to vLLM's local server, shared by both modes, and the one
place where its exceptions become answers ("upstream errors become answers").

``open_session`` builds the ``aiohttp.ClientSession`` that both the queue-mode proxy
(``worker.queue.proxy``) and the load-balancing relay (``worker.lb.upstream``) hold: a pool of
keep-alive connections to 127.0.0.1, a connect limit and a per-read limit
(REQUEST_TIMEOUT: a long stream is fine while it moves), no proxy from the environment,
no cookies kept. Build it inside the running event loop that will use it.

Why aiohttp and not httpx: per proxied request aiohttp cost 0.41 ms, httpx 1.73 ms
(``docs/benchmarks.md`` §5). aiohttp is the runpod SDK's own HTTP client: no new
dependency.

How aiohttp's exceptions are answered (``answer_for``; everything else propagates)::

    aiohttp.ClientError (and asyncio's TimeoutError)
    ├── ClientConnectorError, ConnectionTimeoutError  -> answers.upstream_unreachable (503)
    ├── ServerTimeoutError (and asyncio's TimeoutError) -> answers.upstream_timeout   (504)
    └── everything else (ServerDisconnectedError,
        ClientPayloadError, ClientOSError, ...)        -> answers.upstream_lost      (502)
"""

from __future__ import annotations

from typing import Any

import aiohttp

from worker.seams import answers

__all__ = [
    "CONNECT_TIMEOUT_S",
    "KEEPALIVE_EXPIRY_S",
    "UPSTREAM_ERRORS",
    "answer_for",
    "open_session",
]

CONNECT_TIMEOUT_S = 10.0
# Below uvicorn's 5 s keep-alive (vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE default), so an idle
# connection is dropped here before vLLM drops it and a request is never sent into a
# closing socket.
KEEPALIVE_EXPIRY_S = 4.0

# What talking to vLLM can raise and ``answer_for`` answers.
UPSTREAM_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError)


def open_session(
    *, request_timeout: float, limit: int = 0, **options: Any
) -> aiohttp.ClientSession:
    """The pooled session to vLLM; ``limit`` connections at most (0: no limit).

    ``options`` go to ``aiohttp.ClientSession`` (e.g. the relay's ``auto_decompress``).
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=limit, limit_per_host=limit, keepalive_timeout=KEEPALIVE_EXPIRY_S
        ),
        # The read limit is per chunk: a long stream is fine while it moves.
        timeout=aiohttp.ClientTimeout(
            total=None, connect=CONNECT_TIMEOUT_S, sock_read=request_timeout
        ),
        cookie_jar=aiohttp.DummyCookieJar(),  # callers' cookies are not ours to keep
        trust_env=False,  # vLLM is local: an HTTP(S)_PROXY must not reroute it
        **options,
    )


def answer_for(exc: BaseException, *, mid_stream: bool = False) -> dict:
    """The one translation from an upstream exception to an error answer."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return answers.upstream_unreachable(detail)
    if isinstance(exc, TimeoutError):  # ServerTimeoutError is one too
        return answers.upstream_timeout(detail)
    return answers.upstream_lost(detail, mid_stream=mid_stream)
