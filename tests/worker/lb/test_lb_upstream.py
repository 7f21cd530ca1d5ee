"""The upstream client's error answers: real aiohttp against a closed local port, and
the translation of aiohttp's exceptions (worker/seams/upstream.py's table, shared with the
queue-mode proxy)."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.support.vllm_env import free_port
from worker.lb import bodies
from worker.lb.upstream import NotOriginForm, Relay, Upstream, upstream_url
from worker.seams.upstream import answer_for


def test_unreachable_vllm_is_answered_503_upstream_error():
    async def relay_to_closed_port() -> list[dict]:
        upstream = Upstream(free_port(), request_timeout=5)
        sent: list[dict] = []

        async def send(message: dict) -> None:  # the ASGI server's side
            sent.append(message)

        try:
            await Relay(upstream, send).run("GET", "/v1/models", [], None)
        finally:
            await upstream.aclose()
        return sent

    start, body = asyncio.run(relay_to_closed_port())
    assert start["status"] == 503
    error = json.loads(body["body"])["error"]
    assert error["type"] == "upstream_error" and error["code"] == 503
    assert error["message"] == "vLLM could not be reached."


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (aiohttp.ConnectionTimeoutError("connect"), 503),
        (aiohttp.ServerTimeoutError("read"), 504),
        (TimeoutError(), 504),
        (aiohttp.ServerDisconnectedError(), 502),
        (aiohttp.ClientPayloadError("cut"), 502),
    ],
)
def test_aiohttp_errors_map_to_the_queue_modes_upstream_answers(exc, status):
    answer = bodies.upstream(answer_for(exc))
    assert answer.status == status
    assert json.loads(answer.body)["error"]["code"] == status


@pytest.mark.parametrize(
    "target",
    ["*@10.0.0.1:80/v1/models", "*", "10.0.0.1:80", "//10.0.0.1/x", "http://10.0.0.1/", ""],
)
def test_a_target_that_is_not_a_path_is_never_turned_into_a_url(target):
    with pytest.raises(NotOriginForm):
        upstream_url(8000, target)


@pytest.mark.parametrize("target", ["/v1/models", "/echo/a%2Fb?b=2&a=1", "/@x:1/y", "/a*@b:1/c"])
def test_every_path_stays_on_vllm_with_its_bytes_untouched(target):
    url = upstream_url(8000, target)
    assert (url.scheme, url.host, url.port, url.user) == ("http", "127.0.0.1", 8000, None)
    assert str(url) == "http://127.0.0.1:8000" + target
