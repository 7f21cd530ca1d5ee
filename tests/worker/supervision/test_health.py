"""The health probe against a loopback HTTP server: ``/health`` polled until 200, the
served length read from ``/v1/models``, and no CA bundle loaded for a plain-http probe."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from worker.supervision import health


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, models: object) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.models: object = models
        self.health_asked = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path == "/health":
            self.server.health_asked += 1
            status, body = (200, b"") if self.server.health_asked >= 3 else (503, b"")
        elif self.path == "/v1/models":
            status, body = 200, json.dumps({"data": self.server.models}).encode()
        else:
            status, body = 404, b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    server = _Server(())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def serve(server: _Server):
    """The module's server, answering ``models`` from ``/v1/models`` and /health 200 from
    its third request on."""

    def start(models: object = ()) -> _Server:
        server.models, server.health_asked = models, 0
        return server

    return start


@pytest.fixture
def no_ca_bundle(monkeypatch):
    """Loading a CA bundle fails: the probe's plain-http clients must not load one
    (httpx's default context does, ~21 ms of CPU per client)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a CA bundle was loaded for a plain-http loopback probe")

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", refuse)


def test_health_is_polled_until_it_answers_200(serve, no_ca_bundle):
    server = serve()
    port = server.server_address[1]
    assert asyncio.run(health.wait_healthy(port, lambda: True)) is True
    assert server.health_asked == 3


def test_health_stops_when_told_to(serve, no_ca_bundle):
    server = serve()
    asked = iter([True, False])
    port = server.server_address[1]
    assert asyncio.run(health.wait_healthy(port, lambda: next(asked))) is False
    assert server.health_asked == 1


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        ([{"id": "m", "max_model_len": 4096}], 4096),
        ([{"id": "m"}, {"id": "n", "max_model_len": 512}], 512),
        ([{"id": "m", "max_model_len": True}], None),
        ([{"id": "m", "max_model_len": -1}], None),
        ([{"id": "m", "max_model_len": "4096"}], None),
        ("not a list", None),
    ],
)
def test_the_served_length_is_read_from_the_models_list(serve, no_ca_bundle, models, expected):
    server = serve(models)
    assert asyncio.run(health.served_max_model_len(server.server_address[1])) == expected


def test_no_answer_is_no_length(no_ca_bundle):
    from tests.support.vllm_env import free_port

    assert asyncio.run(health.served_max_model_len(free_port(), timeout_s=1.0)) is None
