"""The load-balancing run loop: serve ``PORT`` (and ``PORT_HEALTH``) with uvicorn while
the supervisor runs vLLM, until a stop signal or a transient failure.

* SIGTERM/SIGINT: stop accepting connections, let requests in flight finish within the
  grace period (``VLLM_SHUTDOWN_GRACE``; then they are cancelled, which cancels them
  upstream), then stop vLLM's process group. Exit 0. A second signal skips the wait.
* failed-transient (vLLM failed to start, or died after ready): the health check says
  503 so the platform replaces the worker; the first request gets the diagnosis, then
  the worker stops as above and exits 1 (after ``TRANSIENT_ANSWER_TIMEOUT`` without a
  request too), like the queue mode.
* A port that cannot be bound: exit 1 after stopping vLLM.

uvicorn (httptools, on uvloop) is the HTTP server; its own signal capture is off (the
handlers here only record the signal; the loop dispatches). ``PORT`` is served on the
main thread's loop; a separate ``PORT_HEALTH`` on a thread and loop of its own
(``worker.lb.health_thread``). Each port's server speaks ``GuardedHttp``
(``worker.lb.guarded_http``: the limits a public port needs), its connections fitted to
the file-descriptor limit (``worker.lb.guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Iterator

import structlog
import uvicorn
import uvloop

from worker.config.settings import Settings
from worker.lb.guard import HEALTH_CONNECTIONS, Guard, connection_cap, raise_nofile
from worker.lb.guarded_http import protocol_for
from worker.lb.health import HealthApp
from worker.lb.health_thread import HealthThread
from worker.lb.mode import Endpoint
from worker.lb.proxy import ProxyApp
from worker.lb.upstream import Upstream
from worker.seams import logs
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

log = structlog.get_logger("worker.lb")

EXIT_OK, EXIT_FAILED = 0, 1
# The public ports listen on every interface: the platform's load balancer reaches the
# worker from outside; vLLM itself stays on 127.0.0.1.
HOST = "0.0.0.0"
# How often the run loop looks at the supervisor's state (it changes in another thread).
STATE_POLL_S = 0.05


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the run loop owns the signals


def run(
    supervisor: Supervisor,
    settings: Settings,
    endpoint: Endpoint,
    interrupted: threading.Event,
) -> int:
    """Serve until stopped; stop vLLM; return the exit code."""
    grace = settings.shutdown_grace_s
    health = HealthApp(supervisor, endpoint.health_path)
    shared = endpoint.health_port == endpoint.port
    cap = connection_cap(endpoint.limits.connections, raise_nofile())
    health_thread = None
    try:
        # PORT listens before PORT_HEALTH starts: a health check that answers means PORT
        # accepts connections (the platform, and a client polling /ping, may send at once).
        sock = listening_socket(endpoint.port)
        if not shared:
            guard = Guard(endpoint.health_port, endpoint.limits, HEALTH_CONNECTIONS, None)
            config = _config(health, endpoint.health_port, grace, guard)
            health_thread = HealthThread(_Server(config))
            health_thread.start()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            code = runner.run(
                _serve(
                    supervisor, settings, endpoint, interrupted, health, health_thread, cap, sock
                )
            )
    except OSError as exc:  # PORT cannot be bound
        log.error(
            "lb.bind_failed", port=endpoint.port, health_port=endpoint.health_port, error=str(exc)
        )
        code = EXIT_FAILED
    except SystemExit:  # uvicorn could not serve the bound socket (it logged why)
        log.error("lb.bind_failed", port=endpoint.port, health_port=endpoint.health_port)
        code = EXIT_FAILED
    finally:
        if health_thread is not None:
            health_thread.stop(grace + 5)
    if health_thread is not None and health_thread.failed:
        log.error("lb.bind_failed", port=endpoint.port, health_port=endpoint.health_port)
        code = EXIT_FAILED
    log.info("lb.stopping_vllm")
    supervisor.request_stop()
    supervisor.wait_stopped(grace + 5)
    if supervisor.state is WorkerState.FAILED_TRANSIENT:
        code = EXIT_FAILED
    return code


def listening_socket(port: int, backlog: int = 2048) -> socket.socket:
    """PORT's socket, bound on ``HOST`` and listening (uvicorn serves it); OSError when the
    port cannot be bound."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def _config(app, port: int, grace_s: float, guard: Guard) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=HOST,
        port=port,
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        # vLLM's own Date and Server headers pass through.
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=max(1, round(grace_s)),
        http=protocol_for(guard),
        ws="none",  # nothing is upgraded: vLLM's routes are plain HTTP
    )


async def _serve(
    supervisor: Supervisor,
    settings: Settings,
    endpoint: Endpoint,
    interrupted: threading.Event,
    health: HealthApp,
    health_thread: HealthThread | None,
    cap: int,
    sock: socket.socket,
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    answered = asyncio.Event()
    upstream = Upstream(settings.vllm_port, request_timeout=settings.request_timeout_s)
    grace = settings.shutdown_grace_s
    limits = endpoint.limits
    shared = health_thread is None
    app = ProxyApp(
        supervisor,
        upstream,
        health=health if shared else None,
        on_failure_answered=lambda state: (
            answered.set() if state is WorkerState.FAILED_TRANSIENT else None
        ),
        limits=limits,
    )
    guard = Guard(endpoint.port, limits, cap, health.path if shared else None)
    servers = [_Server(_config(app, endpoint.port, grace, guard))]
    log.info(
        "lb.listening",
        port=endpoint.port,
        health_port=endpoint.health_port,
        health_path=endpoint.health_path,
        connections=cap,
        header_bytes=limits.header_bytes,
        header_timeout_s=limits.header_timeout_s,
        body_bytes=limits.body_bytes,
        body_timeout_s=limits.body_timeout_s,
    )
    with _signals(loop, stop, servers, health_thread):
        if interrupted.is_set():  # a signal came while main was still wiring things
            stop.set()
        serving = [asyncio.ensure_future(server.serve(sockets=[sock])) for server in servers]
        transient = asyncio.ensure_future(
            _after_transient(supervisor, answered, settings.transient_answer_timeout_s)
        )
        stopped = asyncio.ensure_future(stop.wait())
        watched: list[asyncio.Future] = [*serving, transient, stopped]
        if health_thread is not None:
            watched.append(loop.run_in_executor(None, health_thread.done.wait))
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            failed = transient.done() or (health_thread is not None and health_thread.failed)
            code = EXIT_FAILED if failed else EXIT_OK
            log.info("lb.draining", reason="failed-transient" if transient.done() else "signal")
            for server in [*servers, *([health_thread.server] if health_thread else [])]:
                server.should_exit = True
            await asyncio.gather(*serving)
        finally:
            transient.cancel()
            stopped.cancel()
            if health_thread is not None:
                # Also on an error here: the executor's wait on it ends with it, else the
                # loop's close would wait for it forever (a hang instead of an exit).
                health_thread.server.should_exit = True
            await upstream.aclose()
    return code


async def _after_transient(supervisor: Supervisor, answered: asyncio.Event, wait_s: float) -> None:
    """Returns once the worker failed transiently and one request got the diagnosis (or
    ``wait_s`` passed without one)."""
    while supervisor.state is not WorkerState.FAILED_TRANSIENT:
        await asyncio.sleep(STATE_POLL_S)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(answered.wait(), wait_s)


@contextlib.contextmanager
def _signals(
    loop: asyncio.AbstractEventLoop,
    stop: asyncio.Event,
    servers: list[_Server],
    health_thread: HealthThread | None,
) -> Iterator[None]:
    """SIGTERM/SIGINT set ``stop``; a second one ends the drain at once. The previous
    handlers come back afterwards (main's: a late signal still stops vLLM)."""

    def handler(signum, _frame) -> None:
        name = signal.Signals(signum).name
        logs.from_signal_handler(log, "worker.signal", signal=name, phase="serving")
        if stop.is_set():
            for server in [*servers, *([health_thread.server] if health_thread else [])]:
                server.force_exit = True
        loop.call_soon_threadsafe(stop.set)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
