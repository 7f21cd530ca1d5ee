"""VllmProxy against a stand-in for vLLM's HTTP server, and the error answers it gives.

``FakeVllm`` stands in for vLLM: a raw HTTP/1.1 server on 127.0.0.1 (asyncio streams)
so each test scripts every byte, holds a stream open on an ``asyncio.Event`` and can
cut the connection part-way, as a dying vLLM does. Its error bodies copy vLLM 0.32's
shape, ``{"error": {"message", "type", "param", "code"}}`` (ErrorResponse in
vllm/entrypoints/serve/engine/protocol.py). Every test runs under ``asyncio.wait_for`` so a proxy that buffers a stream
fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.vllm_env import free_port
from worker.queue.jobs import ProxyRequest
from worker.queue.proxy import SseSplitter, VllmProxy
from worker.seams import answers

TEST_TIMEOUT_S = 10.0

CHAT = ProxyRequest("POST", "/v1/chat/completions", {"model": "m", "messages": []}, False)
CHAT_STREAM = ProxyRequest(
    "POST", "/v1/chat/completions", {"model": "m", "messages": [], "stream": True}, True
)
MODELS = ProxyRequest("GET", "/v1/models", None, False)


def sse(content: str) -> str:
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": content}}]}
    return f"data: {json.dumps(chunk)}\n\n"


DONE = "data: [DONE]\n\n"
VLLM_400 = {
    "error": {
        "message": "This model's maximum context length is 16 tokens.",
        "type": "BadRequestError",
        "param": "messages",
        "code": 400,
    }
}


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), TEST_TIMEOUT_S))


def decode(item: object) -> dict:
    """The error object inside an error output; fails unless it is one."""
    assert isinstance(item, dict) and set(item) == {"error"}, item
    assert isinstance(item["error"], str), "the SDK would turn a dict into a Python repr"
    return json.loads(item["error"])


async def collect(proxy: VllmProxy, request: ProxyRequest) -> list[object]:
    return [item async for item in proxy.run(request)]


# -- a stand-in for vLLM --------------------------------------------------------------


@dataclass
class Seen:
    """One request as the stand-in received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Reply:
    """Writes one HTTP/1.1 response, whole or chunk by chunk."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.aborted = False

    async def json(self, status: int, body: object, content_type: str = "application/json") -> None:
        await self.raw(status, json.dumps(body).encode(), content_type)

    async def raw(self, status: int, data: bytes, content_type: str = "text/plain") -> None:
        head = (
            f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        )
        self._writer.write(head.encode() + data)
        await self._writer.drain()

    async def start_stream(self, status: int = 200) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            "transfer-encoding: chunked\r\n\r\n"
        )
        self._writer.write(head.encode())
        await self._writer.drain()

    async def chunk(self, text: str) -> None:
        data = text.encode()
        self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self._writer.drain()

    async def end_stream(self) -> None:
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()

    async def until_client_closes(self) -> None:
        """Wait for the client to close its end (the proxy stopped reading)."""
        while await self._reader.read(1024):
            pass

    def abort(self) -> None:
        """Cut the connection without finishing the response (vLLM died)."""
        self.aborted = True
        self._writer.transport.abort()


Respond = Callable[[Seen, Reply], Awaitable[None]]


@dataclass
class FakeVllm:
    """Stands in for vLLM's HTTP server on 127.0.0.1; ``respond`` scripts each answer."""

    respond: Respond
    seen: list[Seen] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    async def __aenter__(self) -> FakeVllm:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:  # handlers still scripted to wait: end them
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:  # keep-alive: one connection may carry several requests
                line = await reader.readline()
                if not line:
                    break
                method, target, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.seen.append(Seen(method, target, headers, body))
                reply = Reply(reader, writer)
                await self.respond(self.seen[-1], reply)
                if reply.aborted:
                    return
            # The client closed its side (e.g. it stopped reading a stream).
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Ended by __aexit__. Returning (not re-raising) because Python 3.11's
            # start_server callback calls task.exception() on a cancelled task and logs it.
            pass
        finally:
            self.disconnected.set()
            self._tasks.discard(task)
            writer.close()

    def proxy(self, **kwargs: Any) -> VllmProxy:
        options = {"request_timeout": 5.0, "max_concurrency": 4, **kwargs}
        return VllmProxy(self.port, **options)


# -- non-streaming --------------------------------------------------------------------


def test_2xx_json_is_the_one_item() -> None:
    completion = {"id": "chatcmpl-1", "choices": [{"message": {"content": "hi"}}]}

    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(200, completion)

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            assert await collect(proxy, CHAT) == [completion]
            seen = vllm.seen[0]
            assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
            assert seen.json() == CHAT.body
            assert seen.headers["content-type"] == "application/json"

    run(test)


def test_get_sends_no_body_and_reuses_the_connection() -> None:
    models = {"object": "list", "data": [{"id": "m"}]}

    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(200, models)

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            assert await collect(proxy, MODELS) == [models]
            assert await collect(proxy, MODELS) == [models]
            assert [(s.method, s.body) for s in vllm.seen] == [("GET", b"")] * 2
            assert not vllm.disconnected.is_set(), "one long-lived client keeps its connection"

    run(test)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        pytest.param(
            400,
            VLLM_400,
            {
                "message": "This model's maximum context length is 16 tokens.",
                "type": "BadRequestError",
                "code": 400,
                "status": 400,
                "param": "messages",
            },
            id="vllm-400",
        ),
        pytest.param(
            503,
            {"error": {"message": "engine dead", "type": "InternalServerError", "code": 503}},
            {"message": "engine dead", "type": "InternalServerError", "code": 503, "status": 503},
            id="vllm-5xx",
        ),
        pytest.param(
            404,
            {"detail": "Not Found"},
            {"message": "Not Found", "type": "upstream_http_error", "code": 404, "status": 404},
            id="fastapi-404",
        ),
        pytest.param(
            400,
            {"object": "error", "message": "old shape", "type": "BadRequestError", "code": 400},
            {"message": "old shape", "type": "BadRequestError", "code": 400, "status": 400},
            id="older-vllm-shape",
        ),
    ],
)
def test_upstream_http_errors_pass_vllms_own_error_through(
    status: int, body: dict, expected: dict
) -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(status, body)

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            (item,) = await collect(proxy, CHAT)
            assert decode(item) == expected

    run(test)


def test_non_json_bodies_are_quoted() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        if seen.path == "/v1/completions":
            await reply.raw(200, b"<html>oops</html>")
        else:
            await reply.raw(502, b"Bad Gateway")

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            (error,) = await collect(proxy, CHAT)
            assert decode(error) == {
                "message": "vLLM answered HTTP 502: Bad Gateway",
                "type": "upstream_http_error",
                "code": 502,
                "status": 502,
            }
            completions = ProxyRequest("POST", "/v1/completions", {"model": "m"}, False)
            (bad_body,) = await collect(proxy, completions)
            assert decode(bad_body)["type"] == "upstream_error"
            assert decode(bad_body)["detail"] == "<html>oops</html>"

    run(test)


def test_a_2xx_body_with_an_error_key_still_becomes_a_json_string() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(200, {"error": {"message": "odd", "type": "X", "code": 1}})

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            (item,) = await collect(proxy, CHAT)
            assert decode(item)["message"] == "odd"

    run(test)


def test_vllm_not_listening_is_upstream_unreachable() -> None:
    async def test() -> None:
        async with VllmProxy(free_port(), request_timeout=5, max_concurrency=1) as proxy:
            for request in (CHAT, CHAT_STREAM):
                (item,) = await collect(proxy, request)
                error = decode(item)
                assert (error["type"], error["code"]) == ("upstream_error", 503)
                assert error["message"] == "vLLM could not be reached."
                assert error["detail"].startswith("ClientConnectorError")

    run(test)


def test_connection_closed_before_an_answer_is_upstream_lost() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        reply.abort()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            (item,) = await collect(proxy, CHAT)
            error = decode(item)
            assert (error["type"], error["code"]) == ("upstream_error", 502)
            assert "lost" in error["message"]

    run(test)


def test_no_answer_within_request_timeout_is_upstream_timeout() -> None:
    release = asyncio.Event()

    async def respond(seen: Seen, reply: Reply) -> None:
        await release.wait()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy(request_timeout=0.2) as proxy:
            (item,) = await collect(proxy, CHAT)
            release.set()
            error = decode(item)
            assert (error["type"], error["code"]) == ("upstream_error", 504)
            assert "Timeout" in error["detail"].split(":")[0]

    run(test)


def test_the_pool_holds_max_concurrency_requests_at_once() -> None:
    concurrency = 6
    all_arrived = asyncio.Event()

    async def respond(seen: Seen, reply: Reply) -> None:
        if len(vllm.seen) == concurrency:
            all_arrived.set()
        await all_arrived.wait()  # nobody is answered until every request is in
        await reply.json(200, {"n": len(vllm.seen)})

    vllm = FakeVllm(respond)

    async def test() -> None:
        async with vllm, vllm.proxy(max_concurrency=concurrency) as proxy:
            results = await asyncio.gather(*(collect(proxy, CHAT) for _ in range(concurrency)))
            assert all(result == [{"n": concurrency}] for result in results)

    run(test)


# -- streaming ------------------------------------------------------------------------


def test_stream_is_forwarded_chunk_by_chunk() -> None:
    first_item_seen = asyncio.Event()
    events = [sse("Hel"), sse("lo"), DONE]

    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.start_stream()
        await reply.chunk(events[0])
        # The rest is sent only once the job has the first chunk: a proxy that
        # buffers the answer would wait here forever (and the test would time out).
        await first_item_seen.wait()
        await reply.chunk(events[1])
        await reply.chunk(events[2])
        await reply.end_stream()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            items = []
            async for item in proxy.run(CHAT_STREAM):
                items.append(item)
                first_item_seen.set()
            assert items[0] == events[0]
            assert "".join(items) == "".join(events)
            assert items[-1].endswith(DONE)
            assert json.loads(vllm.seen[0].body)["stream"] is True

    run(test)


def test_stream_is_recut_on_event_boundaries() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.start_stream()
        await reply.chunk(sse("a")[:10])  # half an event: held back
        await reply.chunk(sse("a")[10:] + sse("b") + sse("c")[:5])
        await reply.chunk(sse("c")[5:] + DONE)
        await reply.end_stream()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            items = await collect(proxy, CHAT_STREAM)
            assert "".join(items) == sse("a") + sse("b") + sse("c") + DONE
            assert all(isinstance(i, str) and i.endswith("\n\n") for i in items)

    run(test)


def test_stream_non_2xx_is_one_error_item() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(400, VLLM_400)

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            (item,) = await collect(proxy, CHAT_STREAM)
            assert decode(item)["type"] == "BadRequestError"
            assert decode(item)["status"] == 400

    run(test)


def test_connection_lost_mid_stream_ends_with_an_error_item() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.start_stream()
        await reply.chunk(sse("Hel"))
        await reply.chunk(sse("lo"))
        reply.abort()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            items = await collect(proxy, CHAT_STREAM)
            assert "".join(i for i in items[:-1] if isinstance(i, str)) == sse("Hel") + sse("lo")
            error = decode(items[-1])
            assert (error["type"], error["code"]) == ("upstream_error", 502)
            assert "in the middle of a streamed answer" in error["message"]
            assert error["detail"].startswith("ClientPayloadError")

    run(test)


def test_a_job_that_stops_reading_closes_the_upstream_request() -> None:
    """Cancelling a job must reach vLLM as a disconnect, so vLLM aborts the generation."""

    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.start_stream()
        await reply.chunk(sse("first"))
        await reply.until_client_closes()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            stream = proxy.run(CHAT_STREAM)
            assert await anext(stream) == sse("first")
            await stream.aclose()
            await vllm.disconnected.wait()

    run(test)


# -- the request itself ---------------------------------------------------------------


def test_requests_go_to_localhost_port_with_the_body_as_strict_json() -> None:
    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.json(200, {"ok": True})

    body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            request = ProxyRequest("POST", "/v1/chat/completions", body, False)
            assert await collect(proxy, request) == [{"ok": True}]
            seen = vllm.seen[0]
            assert seen.headers["host"] == f"127.0.0.1:{vllm.port}"
            assert seen.json() == body
            assert seen.headers["content-length"] == str(len(seen.body))

    run(test)


def test_a_stream_cut_inside_a_multibyte_character_is_decoded_whole() -> None:
    text = 'data: {"content": "héllo wörld"}\n\n'  # raw UTF-8, as vLLM sends it
    data = text.encode()
    cut = data.index("é".encode()) + 1  # between the two bytes of é

    async def respond(seen: Seen, reply: Reply) -> None:
        await reply.start_stream()
        for piece in (data[:cut], data[cut:]):
            reply._writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await reply._writer.drain()
        await reply.end_stream()

    async def test() -> None:
        async with FakeVllm(respond) as vllm, vllm.proxy() as proxy:
            assert "".join(await collect(proxy, CHAT_STREAM)) == text

    run(test)


# -- pieces ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["data: 1\n\n"], ["data: 1\n\n"]),
        (["data: 1\n", "\ndata: 2\n\n"], ["", "data: 1\n\ndata: 2\n\n"]),
        (["data: 1\n\ndata: 2"], ["data: 1\n\n"]),
        (["data: 1\r\n\r\n", "x"], ["data: 1\r\n\r\n", ""]),
        (["event: a\rdata: 1\r\r"], ["event: a\rdata: 1\r\r"]),
        (["no boundary yet"], [""]),
    ],
)
def test_sse_splitter_releases_complete_events(pieces: list[str], expected: list[str]) -> None:
    splitter = SseSplitter()
    assert [splitter.feed(piece) for piece in pieces] == expected
    assert "".join(expected) + splitter.flush() == "".join(pieces)


def test_sse_splitter_never_holds_more_than_its_limit() -> None:
    splitter = SseSplitter(max_held=10)
    assert splitter.feed("x" * 8) == ""
    assert splitter.feed("x" * 8) == "x" * 16
    assert splitter.flush() == ""


def test_error_answers_are_json_strings_with_their_fields() -> None:
    assert decode(answers.bad_input("prompt must be a string")) == {
        "message": "prompt must be a string",
        "type": "invalid_request_error",
        "code": 400,
    }
    assert decode(
        answers.startup_error("Not enough GPU memory.", category="oom", rule="oom-1")
    ) == {
        "message": "Not enough GPU memory.",
        "type": "startup_error",
        "code": None,
        "category": "oom",
        "rule": "oom-1",
    }
    tail = [f"line {n}" for n in range(answers.MAX_TAIL_LINES + 5)]
    prestart = decode(answers.prestart_failed("vLLM exited with 1.", tail))
    assert (prestart["type"], prestart["code"]) == ("prestart_failed", None)
    assert prestart["tail"] == tail[-answers.MAX_TAIL_LINES :]
    assert answers.error_output(answers.error_payload("m", "t", None, extra=1)) == {
        "error": '{"message": "m", "type": "t", "code": null, "extra": 1}'
    }


def test_long_non_json_bodies_are_cut() -> None:
    error = decode(answers.upstream_http_error(500, "x" * 5000))
    assert error["message"].endswith("... (3000 more characters)")
