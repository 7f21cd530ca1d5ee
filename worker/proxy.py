"""Send one ``ProxyRequest`` to vLLM's local HTTP server and turn the answer into job items.

Owns the one long-lived ``httpx.AsyncClient`` and the one place (``_answer_for``) where
httpx's exceptions become job answers. Knows nothing of runpod or of job input shapes:
``worker.jobs`` builds the request, ``worker.answers`` shapes every error, and the
handler yields what ``VllmProxy.run`` yields.

What ``run`` yields:

* non-streaming: exactly one item, the parsed JSON body on 2xx, else an error output;
* streaming: the SSE text as it arrives, cut only at event boundaries (``\\n\\n``), then
  nothing more on a clean end; one error output instead when vLLM answers non-2xx; an
  error output as the *last* item when the connection breaks part-way.

How httpx's exceptions are answered (everything else propagates)::

    httpx.HTTPError
    ├── ConnectError, ConnectTimeout,
    │   UnsupportedProtocol, ProxyError  -> answers.upstream_unreachable  (503)
    ├── ReadTimeout, WriteTimeout,
    │   PoolTimeout                      -> answers.upstream_timeout      (504)
    └── everything else (ReadError,
        RemoteProtocolError, ...)        -> answers.upstream_lost         (502)
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx

from worker import answers
from worker.jobs import ProxyRequest

__all__ = ["SseSplitter", "VllmProxy"]

CONNECT_TIMEOUT_S = 10.0
# Below uvicorn's 5 s keep-alive (vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE default), so we drop
# an idle connection before the server does and never send a POST into a closing socket.
KEEPALIVE_EXPIRY_S = 4.0


class VllmProxy:
    """Forwards requests to vLLM at ``http://127.0.0.1:{port}`` over one pooled client.

    ``transport`` replaces the network (tests pass ``httpx.MockTransport``); the pool
    holds ``max_concurrency`` connections so every concurrent job has one.
    """

    def __init__(
        self,
        port: int,
        *,
        request_timeout: float,
        max_concurrency: int,
        transport: httpx.AsyncBaseTransport | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=f"http://{host}:{port}",
            timeout=httpx.Timeout(request_timeout, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(
                max_connections=max_concurrency,
                max_keepalive_connections=max_concurrency,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
            transport=transport,
            # vLLM is local: an HTTP(S)_PROXY from the environment must not reroute it.
            trust_env=False,
        )

    async def run(self, req: ProxyRequest) -> AsyncIterator[object]:
        """Yield the job items for ``req`` (see the module docstring)."""
        if req.stream:
            async for item in self._stream(req):
                yield item
        else:
            yield await self._once(req)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()

    async def __aenter__(self) -> VllmProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _once(self, req: ProxyRequest) -> object:
        try:
            response = await self._client.request(req.method, req.path, json=req.body)
        except httpx.HTTPError as exc:
            return _answer_for(exc, mid_stream=False)
        if not response.is_success:
            return answers.upstream_http_error(response.status_code, response.content)
        try:
            body = response.json()
        except ValueError:
            return answers.upstream_bad_body(response.status_code, response.content)
        if isinstance(body, dict) and body.get("error"):
            # The SDK would end the job with str(body["error"]), a Python repr; answer
            # with the JSON-string form instead.
            return answers.upstream_http_error(response.status_code, body)
        return body

    async def _stream(self, req: ProxyRequest) -> AsyncIterator[object]:
        sent_any = False
        try:
            async with self._client.stream(req.method, req.path, json=req.body) as response:
                if not response.is_success:
                    body = await response.aread()
                    yield answers.upstream_http_error(response.status_code, body)
                    return
                splitter = SseSplitter()
                async for text in response.aiter_text():
                    ready = splitter.feed(text)
                    if ready:
                        sent_any = True
                        yield ready
                rest = splitter.flush()
                if rest:
                    yield rest
        except httpx.HTTPError as exc:
            yield _answer_for(exc, mid_stream=sent_any)


# No connection was ever made: vLLM is down or not listening yet.
_UNREACHABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.UnsupportedProtocol,
    httpx.ProxyError,
)


def _answer_for(exc: httpx.HTTPError, *, mid_stream: bool) -> dict:
    """The one translation from an httpx exception to a job's error answer."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, _UNREACHABLE):
        return answers.upstream_unreachable(detail)
    if isinstance(exc, httpx.TimeoutException):
        return answers.upstream_timeout(detail)
    return answers.upstream_lost(detail, mid_stream=mid_stream)


# An empty line ends an SSE event; lines may end in CRLF, LF or CR.
_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")


class SseSplitter:
    """Re-cuts streamed text so each piece ends on an SSE event boundary.

    Holds back at most one incomplete event (and never more than ``max_held``
    characters), so a stream is forwarded event by event and never buffered whole.
    """

    def __init__(self, max_held: int = 1 << 20) -> None:
        self._held = ""
        self._max_held = max_held

    def feed(self, text: str) -> str:
        """Add ``text``; return all complete events now available ('' if none)."""
        self._held += text
        end = 0
        for match in _EVENT_END.finditer(self._held):
            end = match.end()
        if end == 0 and len(self._held) > self._max_held:
            end = len(self._held)
        ready, self._held = self._held[:end], self._held[end:]
        return ready

    def flush(self) -> str:
        """Return whatever is held (a last event without its closing blank line)."""
        rest, self._held = self._held, ""
        return rest
