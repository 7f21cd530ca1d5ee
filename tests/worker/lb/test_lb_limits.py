"""The load-balancing HTTP server's limits (issue 23 §5), each against the worker as a
process: what a client sends to ``PORT`` is bounded in size and time, bodies stream to
vLLM, the health check on ``PORT_HEALTH`` answers whatever ``PORT`` is put through
(its own thread, loop and file descriptors), and every accepted connection gets a status
at the exit after a transient failure.

The stand-in vLLM is ``tests.worker.lb.sink_vllm`` (it counts a body and drops it), so
the memory measured is the worker's. RSS is read with psutil, sampled every 20 ms.
"""

from __future__ import annotations

import contextlib
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.raw_http import read_answer, status_of
from tests.support.vllm_env import events, free_port, running_worker, stand_in, worker_env
from tests.worker.lb.test_lb_worker import TRANSIENT, client, health_until

SINK = f"{sys.executable} -m tests.worker.lb.sink_vllm"
MiB = 1024 * 1024
# The limits the module's worker runs with (short timeouts: the test takes seconds).
HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
BODY_BYTES = 300 * MiB
# What the worker's RSS may grow by under any one attack here (it starts at ~90 MiB).
RSS_GROWTH_MIB = 40


def limits_env(tmp: Path, command: str = SINK, **extra: str) -> dict[str, str]:
    settings = {
        "MODEL_NAME": "stand-in/model",
        "VLLM_COMMAND": command,
        "WORKER_MODE": "lb",
        "PORT": str(free_port()),
        "PORT_HEALTH": str(free_port()),
        "LB_HEADER_TIMEOUT": str(HEADER_TIMEOUT_S),
        "LB_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
        "LB_MAX_BODY_BYTES": str(BODY_BYTES),
    }
    return worker_env(tmp, **{**settings, **extra})


class Ready:
    def __init__(self, proc: subprocess.Popen, env: dict[str, str]) -> None:
        self.proc = proc
        self.port = int(env["PORT"])
        self.health_port = int(env["PORT_HEALTH"])
        self.ps = psutil.Process(proc.pid)

    def rss_mib(self) -> float:
        return self.ps.memory_info().rss / MiB


@pytest.fixture(scope="module")
def ready(tmp_path_factory) -> Iterator[Ready]:
    log_dir = tmp_path_factory.mktemp("lb-limits")
    env = limits_env(log_dir)
    with running_worker(env, log_dir) as proc:
        assert health_until(int(env["PORT_HEALTH"]), "/ping", 200)[-1] == 200
        yield Ready(proc, env)


@contextlib.contextmanager
def peak_rss(ready: Ready) -> Iterator[list[float]]:
    """Samples the worker's RSS every 20 ms; yields [before, peak] (peak filled at exit)."""
    result = [ready.rss_mib(), 0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            with contextlib.suppress(psutil.Error):
                result[1] = max(result[1], ready.rss_mib())
            done.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        done.set()
        thread.join()


def send_until_answered(port: int, head: bytes, filler: bytes, total: int) -> tuple[bytes, int]:
    """Send ``head`` then ``filler`` repeatedly (``total`` bytes in all) until the server
    answers or stops reading; return (its answer, bytes sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        sent += len(head)
        try:
            while sent < total:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                sock.sendall(filler)
                sent += len(filler)
        except OSError:
            pass
        return read_answer(sock), sent


def ping_ms(port: int) -> float:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = read_answer(sock)
    assert status_of(answer) == 200, answer[:200]
    return (time.monotonic() - started) * 1000


# -- headers


def test_a_50_mib_header_is_refused_431_without_memory(ready, reliability):
    # Was: accepted on both ports (a 256 MiB one grew the worker by ~470 MiB).
    head = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: "
    growth, most = 0.0, 0
    for port in (ready.port, ready.health_port):
        with peak_rss(ready) as rss:
            answer, sent = send_until_answered(port, head, b"a" * 65536, 50 * MiB)
        assert status_of(answer) == 431, answer[:200]
        assert b"invalid_request_error" in answer and b"65536 bytes" in answer
        assert sent < 4 * MiB  # refused at 64 KiB, not after reading 50 MiB
        assert rss[1] - rss[0] < RSS_GROWTH_MIB, rss
        growth, most = max(growth, rss[1] - rss[0]), max(most, sent)
    reliability(
        "a 50 MiB request header on PORT and on PORT_HEALTH (was: accepted; 256 MiB grew "
        "the worker by ~470 MiB)",
        "ready",
        f"431 on both after 64 KiB (the client had sent {most / MiB:.1f} MiB when it read "
        f"the answer); worker RSS +{growth:.0f} MiB",
    )


def test_too_many_headers_are_refused_431(ready):
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
    head += b"".join(b"X-H%d: v\r\n" % i for i in range(101)) + b"\r\n"
    with socket.create_connection(("127.0.0.1", ready.port), timeout=30) as sock:
        sock.sendall(head)
        answer = read_answer(sock)
    assert status_of(answer) == 431, answer[:200]
    with client(ready.port) as http:  # 100 headers are fine
        headers = {f"x-h{i}": "v" for i in range(90)}
        assert http.get("/v1/models", headers=headers).status_code == 200


def test_health_answers_at_once_while_port_is_sent_a_160_mib_header(ready, reliability):
    # Was: /ping took 9 s while one client sent a 160 MiB header to PORT (one event
    # loop, quadratic header parsing).
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: "
    attackers = [
        threading.Thread(
            target=send_until_answered, args=(ready.port, head, b"a" * 65536, 160 * MiB)
        )
        for _ in range(4)
    ]
    for attacker in attackers:
        attacker.start()
    latencies = []
    while any(a.is_alive() for a in attackers) or len(latencies) < 10:
        latencies.append(ping_ms(ready.health_port))
    for attacker in attackers:
        attacker.join()
    assert max(latencies) < 500, latencies
    reliability(
        "4 clients sending 160 MiB headers to PORT while PORT_HEALTH is probed (was: /ping "
        "took 9 s)",
        "ready",
        f"each sender refused 431 at 64 KiB; slowest /ping {max(latencies):.0f} ms over "
        f"{len(latencies)} probes",
    )


def _all_answered_408(
    port: int, send: Callable[[list[socket.socket]], None], limit_s: float, setting: bytes
) -> float:
    """50 connections to ``port``, ``send`` writing on them: each must be answered 408
    naming ``setting`` within ``limit_s`` (+3 s); the seconds the last answer took."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(50)]
    try:
        started = time.monotonic()
        send(socks)
        answers = [read_answer(sock, timeout=limit_s + 5) for sock in socks]
        elapsed = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    assert [status_of(a) for a in answers] == [408] * len(socks), answers[0][:300]
    assert setting in answers[0]
    assert elapsed < limit_s + 3
    return elapsed


def test_slow_headers_are_answered_408_at_the_header_timeout(ready, reliability):
    # Was: 200 connections dribbling headers for 25 s all stayed open.
    def dribble(socks: list[socket.socket]) -> None:
        for sock in socks:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # a byte every 0.3 s: never done
            time.sleep(0.3)
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")

    elapsed = _all_answered_408(ready.port, dribble, HEADER_TIMEOUT_S, b"LB_HEADER_TIMEOUT")
    reliability(
        "50 connections dribbling headers, a byte every 0.3 s (was: 200 all held 25 s)",
        "ready",
        f"all 50 answered 408 and closed after {elapsed:.1f} s (LB_HEADER_TIMEOUT=1)",
    )


def test_a_connection_that_sends_nothing_is_closed_with_408(ready):
    with socket.create_connection(("127.0.0.1", ready.port), timeout=30) as sock:
        answer = read_answer(sock, timeout=HEADER_TIMEOUT_S + 5)
    assert status_of(answer) == 408


# -- bodies


def test_a_stalled_body_is_answered_408_at_the_body_timeout(ready, reliability):
    # Was: 50 bodies stopped after one byte were held 20 s unanswered.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"

    def send_head(socks: list[socket.socket]) -> None:
        for sock in socks:
            sock.sendall(head)

    elapsed = _all_answered_408(ready.port, send_head, BODY_TIMEOUT_S, b"LB_BODY_TIMEOUT")
    reliability(
        "50 request bodies stopped after 1 byte (was: held 20 s unanswered)",
        "ready",
        f"all 50 answered 408 after {elapsed:.1f} s (LB_BODY_TIMEOUT=1); the requests to "
        "vLLM dropped",
    )


def test_a_body_is_streamed_to_vllm_not_buffered(ready, reliability):
    # Was: a 400 MiB body was buffered before it was forwarded (RSS 91 -> 483 MiB).
    size = 256 * MiB
    head = (
        b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % size
    )
    with peak_rss(ready) as rss, socket.create_connection(("127.0.0.1", ready.port)) as sock:
        sock.sendall(head)
        block = b"b" * MiB
        for _ in range(size // MiB):
            sock.sendall(block)
        answer = read_answer(sock, timeout=60)
    assert status_of(answer) == 200, answer[:300]
    assert b'"bytes": %d' % size in answer  # vLLM got it all
    assert rss[1] - rss[0] < RSS_GROWTH_MIB, rss
    reliability(
        "a 256 MiB request body (was: a 400 MiB one buffered, RSS 91 -> 483 MiB)",
        "ready",
        f"streamed to vLLM whole; worker RSS {rss[0]:.0f} -> peak {rss[1]:.0f} MiB",
    )


def test_a_declared_body_over_the_limit_is_refused_413_before_it_is_read(ready):
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
        BODY_BYTES + 1
    )
    answer, sent = send_until_answered(ready.port, head, b"c" * 65536, BODY_BYTES)
    assert status_of(answer) == 413, answer[:300]
    assert b"LB_MAX_BODY_BYTES" in answer
    assert sent < 16 * MiB


def test_a_chunked_body_that_never_ends_is_cut_413_with_bounded_memory(ready, reliability):
    # Was: a 200 MiB chunked body that never ends grew the worker by 180 MiB.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n%s\r\n" % (MiB, b"d" * MiB)
    with peak_rss(ready) as rss:
        answer, sent = send_until_answered(ready.port, head, chunk, 2 * BODY_BYTES)
    assert status_of(answer) == 413, answer[:300]
    assert BODY_BYTES <= sent < BODY_BYTES + 32 * MiB
    assert rss[1] - rss[0] < RSS_GROWTH_MIB, rss
    reliability(
        "a chunked request body that never ends (was: 200 MiB grew the worker by 180 MiB)",
        "ready",
        f"cut with 413 at LB_MAX_BODY_BYTES ({BODY_BYTES // MiB} MiB here, streamed to vLLM "
        f"until then); worker RSS +{rss[1] - rss[0]:.0f} MiB",
    )


# -- connections


def test_idle_half_requests_at_the_descriptor_limit_leave_the_health_check_answering(
    tmp_path, reliability
):
    # Was: with nofile=256, 300 idle half-requests on PORT: /ping on the health port and
    # a real request got no answer.
    env = limits_env(tmp_path, LB_HEADER_TIMEOUT="3")
    port, health_port = int(env["PORT"]), int(env["PORT_HEALTH"])
    with running_worker(env, tmp_path, nofile=256) as proc:
        assert health_until(health_port, "/ping", 200)[-1] == 200
        socks = []
        try:
            for _ in range(300):
                with contextlib.suppress(OSError):
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                    socks.append(sock)
            pings = [ping_ms(health_port) for _ in range(5)]
            assert max(pings) < 1000, pings
            held = len(socks)
            with client(port) as http:  # a real request: a status now, never silence
                first = http.get("/v1/models")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # once the header timeout cut them: served
                with client(port) as http, contextlib.suppress(httpx.TransportError):
                    if http.get("/v1/models").status_code == 200:
                        break
                time.sleep(0.2)
            else:
                raise AssertionError("PORT never served again")
        finally:
            for sock in socks:
                sock.close()
        assert proc.poll() is None
    assert first.status_code in (200, 503), first.text
    if first.status_code == 503:
        assert first.json()["error"]["type"] == "overloaded"
    listening = next(e for e in events(tmp_path) if e.get("event") == "lb.listening")
    assert listening["connections"] == (256 - 64 - 32 - 8 - 32) // 2
    reliability(
        "300 idle half-requests on PORT with nofile=256 (was: /ping and a real request got "
        "no answer)",
        "ready",
        f"PORT holds {listening['connections']} (the rest answered 503); /ping answered in "
        f"at most {max(pings):.0f} ms; a request meanwhile got {first.status_code}, and 200 "
        f"once the header timeout (3 s) cut the idle ones ({held} connected)",
    )


def test_every_accepted_connection_gets_a_status_at_the_transient_exit(tmp_path, reliability):
    # Was: at the failed-transient exit one request and one health check got no HTTP
    # status at all (the connection was closed).
    env = limits_env(
        tmp_path,
        stand_in("replay_log", str(TRANSIENT), "1"),
        TRANSIENT_ANSWER_TIMEOUT="120",
        LB_HEADER_TIMEOUT="10",
    )
    port, health_port = int(env["PORT"]), int(env["PORT_HEALTH"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(health_port, "/ping", 503)[-1] == 503

        def connect(where: int) -> socket.socket:
            return socket.create_connection(("127.0.0.1", where), timeout=30)

        half = connect(port)  # a request whose headers are on their way
        half.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        half_health = connect(health_port)
        half_health.sendall(b"GET /ping HTTP/1.1\r\n")
        idle = connect(port)  # connected, nothing sent yet
        idle_health = connect(health_port)
        time.sleep(0.2)  # all four accepted
        with client(port) as http:  # the one answer with the diagnosis: the exit begins
            first = http.post("/v1/completions", json={"prompt": "x"})
        finish = {
            port: [
                (half, b"Content-Length: 2\r\n\r\n{}"),
                (idle, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"),
            ],
            health_port: [
                (half_health, b"Host: x\r\n\r\n"),
                (idle_health, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"),
            ],
        }
        for listener, rest in finish.items():  # once it stopped accepting: the rest
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    connect(listener).close()
                except ConnectionRefusedError:
                    break
                time.sleep(0.01)
            for sock, data in rest:
                sock.sendall(data)
        answers = [read_answer(s) for s in (half, half_health, idle, idle_health)]
        for sock in (half, half_health, idle, idle_health):
            sock.close()
        assert proc.wait(60) == 1
    assert first.status_code == 503
    assert [status_of(a) for a in answers] == [503, 503, 503, 503], [a[:120] for a in answers]
    assert b"prestart_failed" in answers[0] and b"prestart_failed" in answers[2]
    assert all(b"connection: close" in a.lower() for a in answers), answers
    reliability(
        "the failed-transient exit with connections accepted on PORT and PORT_HEALTH: one "
        "mid-headers and one idle on each (was: a request and a health check got no status)",
        "failed-transient",
        "each got 503 (the diagnosis, or the state) with connection: close before the exit; exit 1",
    )


def test_a_shared_health_port_keeps_a_few_connections_for_the_health_check(tmp_path):
    # PORT_HEALTH == PORT: past LB_MAX_CONNECTIONS a few connections may still ask the
    # health path; anything else there is told 503 at once.
    env = limits_env(tmp_path, LB_MAX_CONNECTIONS="2", LB_HEADER_TIMEOUT="30")
    del env["PORT_HEALTH"]
    port = int(env["PORT"])
    with running_worker(env, tmp_path) as proc:
        assert health_until(port, "/ping", 200)[-1] == 200
        time.sleep(0.2)  # the probe's connection is gone
        holders = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
        try:
            for sock in holders:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\n")  # held: a head under way
            time.sleep(0.2)
            health = ping_ms(port)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
                other = read_answer(sock)
        finally:
            for sock in holders:
                sock.close()
        assert proc.poll() is None
    assert health < 1000
    assert status_of(other) == 503 and b"overloaded" in other, other[:300]


def test_an_early_answer_keeps_the_connection_for_a_small_body_and_closes_it_for_a_big_one(
    tmp_path,
):
    # Before ready every request is answered 503 without its body being read: a small
    # body still arriving is dropped and the connection serves the next request; a big
    # one (more than 1 MiB to come) is told connection: close and not read.
    env = limits_env(tmp_path, stand_in("vllm_standin", "--loading"))
    port = int(env["PORT"])
    with running_worker(env, tmp_path):
        assert health_until(int(env["PORT_HEALTH"]), "/ping", 204) == [204]
        # PORT listens before the health port answers (worker/lb/serve.py): 503 at once.
        assert health_until(port, "/v1/models", 503) == [503]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for _ in range(3):
                sock.sendall(
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"
                )
                time.sleep(0.1)  # the answer goes out before the body arrives
                sock.sendall(b"{}")
                head = sock.recv(65536)
                assert head.startswith(b"HTTP/1.1 503"), head[:200]
                assert b"connection: close" not in head.lower()
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
            64 * MiB
        )
        answer, sent = send_until_answered(port, head, b"g" * 65536, 64 * MiB)
    assert status_of(answer) == 503 and b"connection: close" in answer.lower(), answer[:300]
    assert sent < 16 * MiB
