"""The worker in load-balancing mode, as a process, with stand-ins for vLLM where a real
one is not needed (tests/integration/test_lb.py runs the real one):

* ``tests.support.vllm_standin``: an HTTP server that lets a test hold a streamed
  answer, release it, and learn that the proxy cancelled a request upstream;
* ``tests.support.replay_log``: real vLLM output of failed starts (a GPU fault cannot
  happen here).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.support.answers import too_long_answer
from tests.support.loopback_http import loopback_client
from tests.support.vllm_env import (
    ROOT,
    events,
    free_port,
    group_alive,
    running_worker,
    stand_in,
    worker_env,
)

STANDIN = stand_in("vllm_standin")
PERMANENT = ROOT / "fixtures/vllm-0.32/max-model-len-too-large.log"
TRANSIENT = (
    ROOT
    / "fixtures/corpus/cuda_fault/vllm-17344-v085-a100-qwen25vl-72b-awq-profile-illegal-memory-access.log"
)
START_S = 60.0  # a stand-in settles in a second or two; this bounds a broken run


def lb_env(tmp: Path, command: str, **extra: str) -> dict[str, str]:
    return worker_env(
        tmp,
        MODEL_NAME="stand-in/model",
        VLLM_COMMAND=command,
        WORKER_MODE="lb",
        PORT=str(free_port()),
        **extra,
    )


def client(port: int, **kwargs) -> httpx.Client:
    return loopback_client(base_url=f"http://127.0.0.1:{port}", timeout=30, **kwargs)


def health_until(port: int, path: str, wanted: int) -> list[int]:
    """Probe the health check like the platform does until it answers ``wanted``; return
    every status seen (a refused connection, before the worker listens, is not one)."""
    seen: list[int] = []
    deadline = time.monotonic() + START_S
    with client(port) as probe:
        while time.monotonic() < deadline:
            try:
                status = probe.get(path).status_code
            except httpx.TransportError:
                status = None
            if status is not None and (not seen or seen[-1] != status):
                seen.append(status)
            if status == wanted:
                return seen
            time.sleep(0.05)  # the probe's interval, as the platform's
    raise AssertionError(f"health never answered {wanted}; saw {seen}")


def vllm_pgid(log_dir: Path) -> int:
    return next(e["pid"] for e in events(log_dir) if e.get("event") == "vllm.spawned")


def stop(proc) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(60)


def test_before_ready_every_request_gets_503_retry_after_and_the_phase(tmp_path):
    # PORT_HEALTH unset: the health check shares PORT, at the configured path.
    env = lb_env(tmp_path, f"{STANDIN} --loading", HEALTH_CHECK_PATH="/healthz")
    port = int(env["PORT"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(port, "/healthz", 204) == [204]
        with client(port) as http:
            phase = None
            deadline = time.monotonic() + START_S
            while phase != "loading" and time.monotonic() < deadline:
                answer = http.post("/v1/chat/completions", json={"messages": []})
                assert answer.status_code == 503
                assert answer.headers["retry-after"] == "5"
                error = answer.json()["error"]
                assert error["type"] == "not_ready" and error["code"] == 503
                phase = error["phase"]
                assert phase in ("starting", "loading")
            assert phase == "loading"
            assert http.get("/healthz").status_code == 204
            assert http.get("/ping").status_code == 503  # not the health path here: proxied
        pgid = vllm_pgid(tmp_path)
        assert stop(proc) == 0
    assert not group_alive(pgid)


def test_permanent_failure_health_200_and_every_request_gets_the_diagnosis(tmp_path):
    env = lb_env(tmp_path, stand_in("replay_log", str(PERMANENT), "1"))
    env["PORT_HEALTH"] = str(free_port())
    port, health_port = int(env["PORT"]), int(env["PORT_HEALTH"])
    with running_worker(env, tmp_path) as proc:
        assert set(health_until(health_port, "/ping", 200)) <= {204, 200}
        with client(port) as http:
            answers = [
                http.get("/v1/models"),
                http.post("/v1/chat/completions", json={"messages": [], "stream": True}),
                http.post("/v1/messages", json={"max_tokens": 1, "messages": []}),
                http.delete("/anything?at=all"),
            ]
        with client(health_port) as probe:
            assert probe.get("/ping").status_code == 200
            assert probe.get("/v1/models").status_code == 404  # the health port serves only /ping
        assert proc.poll() is None  # stays up, in the pool
        assert stop(proc) == 0
    for answer in answers:
        assert answer.status_code == 503
        error = answer.json()["error"]
        # The queue mode's diagnosis (tests/integration/test_worker_failures.py), same fields.
        assert error == too_long_answer(error["message"])
        assert "MAX_MODEL_LEN to 2048 or less" in error["message"]


def test_a_port_taken_fails_the_worker_before_its_health_port_listens(tmp_path):
    """PORT is bound before PORT_HEALTH starts, so a health check that answers means PORT
    accepts connections; a PORT that cannot be bound ends the worker (exit 1, vLLM
    stopped) without the health port ever listening."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        health = free_port()
        env = lb_env(tmp_path, STANDIN, PORT_HEALTH=str(health))
        env["PORT"] = str(taken.getsockname()[1])
        connected = 0
        with running_worker(env, tmp_path) as proc:
            deadline = time.monotonic() + START_S
            while proc.poll() is None and time.monotonic() < deadline:
                with socket.socket() as probe:
                    connected += probe.connect_ex(("127.0.0.1", health)) == 0
                time.sleep(0.01)  # the probe's pace, not a synchronisation
            code = proc.wait(60)
    assert code == 1
    assert connected == 0
    failed = [e for e in events(tmp_path) if e.get("event") == "lb.bind_failed"]
    assert failed and failed[0]["port"] == int(env["PORT"]) and failed[0]["error"]


def test_invalid_setting_is_answered_on_the_ports_without_starting_vllm(tmp_path):
    env = lb_env(tmp_path, STANDIN, ENFORCE_EAGER="maybe")
    port = int(env["PORT"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(port, "/ping", 200)[-1] == 200
        with client(port) as http:
            answer = http.post("/v1/completions", json={"prompt": "hi"})
        assert stop(proc) == 0
    error = answer.json()["error"]
    assert answer.status_code == 503
    assert error["type"] == "startup_error" and error["category"] == "bad_config"
    assert "ENFORCE_EAGER" in error["message"]
    assert not [e for e in events(tmp_path) if e.get("event") == "vllm.spawning"]


def test_transient_failure_health_5xx_one_answer_then_exit_nonzero(tmp_path):
    env = lb_env(
        tmp_path,
        stand_in("replay_log", str(TRANSIENT), "1"),
        TRANSIENT_ANSWER_TIMEOUT="120",  # the exit must come from the answer
    )
    env["PORT_HEALTH"] = str(free_port())
    with running_worker(env, tmp_path) as proc:
        assert health_until(int(env["PORT_HEALTH"]), "/ping", 503)[-1] == 503
        with client(int(env["PORT"])) as http:
            answer = http.post("/v1/chat/completions", json={"messages": []})
        assert proc.wait(60) == 1
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["type"] == "prestart_failed" and error["code"] is None
    assert error["category"] == "cuda_fault"
    assert any("illegal memory access" in line for line in error["tail"])


def test_ready_passes_everything_through_and_drains_on_sigterm(tmp_path):
    env = lb_env(tmp_path, STANDIN)
    port, upstream = int(env["PORT"]), int(env["VLLM_PORT"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(port, "/ping", 200)[-1] == 200

        # Every method; path as sent, query, headers and status kept both ways.
        with client(port) as http:
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
                answer = http.request(
                    method,
                    "/echo/a%2Fb?b=2&a=1&a=3",
                    headers={"x-status": "418", "authorization": "Bearer caller"},
                    content=None if method == "GET" else b'{"x": 1}',
                )
                assert answer.status_code == 418
                assert answer.headers["x-upstream"] == "echo"
                echo = answer.json()
                assert (echo["method"], echo["query"]) == (method, "b=2&a=1&a=3")
                assert echo["headers"]["authorization"] == "Bearer caller"
                assert echo["body"] == ("" if method == "GET" else '{"x": 1}')
            assert http.get("/not-served").status_code == 404

        # A client that leaves mid-stream: the proxy cancels the request upstream
        # (/cancelled answers only once the stand-in saw its client go).
        with client(port) as leaving, leaving.stream("POST", "/v1/stream") as answer:
            assert next(answer.iter_raw()) == b"data: first\n\n"
        with client(port) as http:
            assert http.get("/cancelled").status_code == 200

            # Unbuffered: the first event arrives while the stand-in holds the rest.
            with http.stream("POST", "/v1/stream") as answer:
                chunks = answer.iter_raw()
                assert next(chunks) == b"data: first\n\n"
                assert http.post("/release").status_code == 200
                assert b"".join(chunks) == b"data: second\n\ndata: [DONE]\n\n"

        # SIGTERM with a stream in flight: no new connections, the stream finishes.
        pgid = vllm_pgid(tmp_path)
        with client(port) as http, http.stream("POST", "/v1/stream") as answer:
            chunks = answer.iter_raw()
            assert next(chunks) == b"data: first\n\n"
            os.killpg(proc.pid, signal.SIGTERM)
            refused = False
            deadline = time.monotonic() + START_S
            while not refused and time.monotonic() < deadline:
                try:
                    with client(port) as late:
                        late.get("/echo/late")
                except httpx.ConnectError:
                    refused = True
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # Queued by the kernel as the listener closed: reset, never served.
                    continue
            assert refused
            with client(upstream) as direct:
                assert direct.post("/release").status_code == 200
            assert b"".join(chunks) == b"data: second\n\ndata: [DONE]\n\n"
        assert proc.wait(60) == 0
    assert not group_alive(pgid)


def test_vllm_dying_after_ready_answers_once_then_exits_nonzero(tmp_path):
    env = lb_env(tmp_path, STANDIN, TRANSIENT_ANSWER_TIMEOUT="120")
    port = int(env["PORT"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(port, "/ping", 200)[-1] == 200
        os.killpg(vllm_pgid(tmp_path), signal.SIGKILL)
        assert health_until(port, "/ping", 503)[-1] == 503
        with client(port) as http:
            answer = http.get("/v1/models")
        assert proc.wait(60) == 1
    error = answer.json()["error"]
    assert answer.status_code == 503 and error["type"] == "prestart_failed"


def _raw_request(port: int, request_line: str) -> bytes:
    """Send one request line exactly as given (no client library normalises it) and read
    the answer until the worker closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"{request_line}\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_no_request_target_reaches_any_address_but_vllm(tmp_path):
    # The open relay: httptools passes a target starting with '*' as the path, and a
    # URL built by concatenation read '127.0.0.1:PORT*@HOST:PORT/...' as userinfo plus
    # another host. Every target that is not a path gets 400 and goes nowhere.
    canary = socket.create_server(("127.0.0.1", 0))
    canary.settimeout(0)
    canary_port = canary.getsockname()[1]
    env = lb_env(tmp_path, STANDIN)
    port = int(env["PORT"])
    with canary, running_worker(env, tmp_path):
        assert health_until(port, "/ping", 200)[-1] == 200
        for line in (
            f"GET *@127.0.0.1:{canary_port}/v1/models HTTP/1.1",
            f"POST *@127.0.0.1:{canary_port}/v1/chat/completions HTTP/1.1",
            f"GET *127.0.0.1:{canary_port}/ HTTP/1.1",
            "OPTIONS * HTTP/1.1",
            f"GET //127.0.0.1:{canary_port}/x HTTP/1.1",
        ):
            answer = _raw_request(port, line)
            assert answer.startswith(b"HTTP/1.1 400"), (line, answer[:200])
            assert b"Traceback" not in answer
        with pytest.raises(BlockingIOError):
            canary.accept()  # nothing ever connected to the other address
        with client(port) as http:  # and a path still reaches vLLM
            assert http.get("/echo/ok").json()["method"] == "GET"
