"""Send one ``ProxyRequest`` to vLLM's local HTTP server and turn the answer into job items.

Owns the one long-lived ``aiohttp.ClientSession`` (``worker.seams.upstream.open_session``,
shared in kind with the load-balancing relay); ``worker.seams.upstream.answer_for`` is the one
place where its exceptions become job answers. Knows nothing of runpod or of job input
shapes: ``worker.queue.jobs`` builds the request, ``worker.seams.answers`` shapes every error, and
the handler yields what ``VllmProxy.run`` yields. The session belongs to the event loop
it is built in: build a ``VllmProxy`` on the loop that runs the jobs (the SDK's; the
handler builds it on its first proxied job).

What ``run`` yields:

* non-streaming: exactly one item, the parsed JSON body on 2xx, else an error output;
* streaming: the SSE text as it arrives, cut only at event boundaries (``\\n\\n``), then
  nothing more on a clean end; one error output instead when vLLM answers non-2xx; an
  error output as the *last* item when the connection breaks part-way.

A job that stops reading a stream (cancelled, timed out) closes its connection, so vLLM
sees the client go and aborts the generation.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncIterator

import aiohttp

from worker.queue.jobs import ProxyRequest
from worker.seams import answers
from worker.seams.upstream import UPSTREAM_ERRORS, answer_for, open_session

__all__ = ["SseSplitter", "VllmProxy"]

_JSON_HEADERS = {"Content-Type": "application/json"}
# aiohttp would add these; vLLM reads none of them.
_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding")


class VllmProxy:
    """Forwards requests to vLLM at ``http://127.0.0.1:{port}`` over one pooled session.

    Build it inside the running event loop that will use it; the pool holds
    ``max_concurrency`` connections so every concurrent job has one.
    """

    def __init__(
        self,
        port: int,
        *,
        request_timeout: float,
        max_concurrency: int,
        host: str = "127.0.0.1",
    ) -> None:
        self._base = f"http://{host}:{port}"
        self._session = open_session(
            request_timeout=request_timeout,
            limit=max_concurrency,
            skip_auto_headers=_NO_AUTO_HEADERS,
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
        await self._session.close()

    async def __aenter__(self) -> VllmProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _send(self, req: ProxyRequest) -> aiohttp.ClientResponse:
        if req.body is None:
            return await self._session.request(req.method, self._base + req.path)
        # Strict JSON: worker.queue.jobs guarantees the body encodes (no NaN/Infinity).
        data = json.dumps(req.body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return await self._session.request(
            req.method, self._base + req.path, data=data.encode(), headers=_JSON_HEADERS
        )

    async def _once(self, req: ProxyRequest) -> object:
        try:
            response = await self._send(req)
            try:
                content = await response.read()
            except BaseException:
                response.close()
                raise
        except UPSTREAM_ERRORS as exc:
            return answer_for(exc, mid_stream=False)
        response.release()
        if not response.ok:
            return answers.upstream_http_error(response.status, content)
        try:
            body = json.loads(content)
        except ValueError:
            return answers.upstream_bad_body(response.status, content)
        if isinstance(body, dict) and body.get("error"):
            # The SDK would end the job with str(body["error"]), a Python repr; answer
            # with the JSON-string form instead.
            return answers.upstream_http_error(response.status, body)
        return body

    async def _stream(self, req: ProxyRequest) -> AsyncIterator[object]:
        sent_any = False
        try:
            response = await self._send(req)
        except UPSTREAM_ERRORS as exc:
            yield answer_for(exc, mid_stream=False)
            return
        try:
            if not response.ok:
                body = await response.read()
                yield answers.upstream_http_error(response.status, body)
            else:
                decoder = codecs.getincrementaldecoder("utf-8")("replace")  # SSE is UTF-8
                splitter = SseSplitter()
                async for chunk in response.content.iter_any():
                    ready = splitter.feed(decoder.decode(chunk))
                    if ready:
                        sent_any = True
                        yield ready
                rest = splitter.feed(decoder.decode(b"", final=True)) + splitter.flush()
                if rest:
                    yield rest
        except UPSTREAM_ERRORS as exc:
            response.close()
            yield answer_for(exc, mid_stream=sent_any)
            return
        except BaseException:
            response.close()  # the job stopped reading: drop the connection, vLLM aborts
            raise
        response.release()


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
