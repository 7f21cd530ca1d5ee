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
main thread's loop; a separate ``PORT_HEALTH`` on a thread and loop of its own, so
nothing a client sends to ``PORT`` (or how many connections it holds) can delay or
starve the health check.

``GuardedHttp`` is uvicorn's httptools protocol with the limits a public port needs
(``worker.lb.mode.Limits``; the numbers are in docs/reliability.md, HTTP limits):

* a request's line and headers: at most ``header_bytes`` bytes, counted as they arrive
  (before httptools, whose header buffer grows by concatenation: a long header costs
  quadratic time), and ``header_count`` headers, else 431; all within
  ``header_timeout_s`` of the connection (or of the first byte of a later request on
  it), else 408;
* connections: ``connection_cap`` of them on ``PORT``, lowered to fit the process's
  file-descriptor limit with room left for the health check, vLLM and the worker; past
  it a connection gets 503 (when ``PORT_HEALTH`` is ``PORT``, a few more may still ask
  the health path); past that it is closed at once;
* every answer the server gives itself (400, 408, 413, 431, 503) is JSON, in the app's
  shape (``worker.lb.bodies``); a connection whose request was not read whole is closed
  after its answer by a lingering close (our side shut, the rest read and dropped for a
  second), so the client reads the answer rather than a reset;
* on stop, every connection gets an answer: a request under way finishes (with
  ``Connection: close``), a request whose head is arriving is answered once it is in,
  and an idle connection may still start one for ``LAST_CALL_S``.

The body bounds (``body_bytes``, ``body_timeout_s``) are ``worker.lb.proxy``'s: it
streams bodies to vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import signal
import threading
import time
from collections.abc import Iterator

import httptools
import structlog
import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from worker.config.settings import Settings
from worker.lb import bodies
from worker.lb.health import HealthApp, respond
from worker.lb.mode import Endpoint, Limits
from worker.lb.proxy import ProxyApp
from worker.lb.upstream import Upstream
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

log = structlog.get_logger("worker.lb")

EXIT_OK, EXIT_FAILED = 0, 1
# The public ports listen on every interface: the platform's load balancer reaches the
# worker from outside; vLLM itself stays on 127.0.0.1.
HOST = "0.0.0.0"
# How often the run loop looks at the supervisor's state (it changes in another thread).
STATE_POLL_S = 0.05

# The file-descriptor budget (``connection_cap``). Each request on PORT holds two
# descriptors (the client's and the one to vLLM).
FD_SPARE = 64  # the worker's own: stdio, pipes to vLLM, loops, the probe, logs
HEALTH_CONNECTIONS = 32  # PORT_HEALTH's own connections (the platform probes one at a time)
HEALTH_RESERVE = 8  # PORT_HEALTH == PORT: connections past the cap that may ask the health path
REFUSING = 16  # per port: connections answered 503 with a lingering close; past it, closed at once
# A connection refused, or whose request was not read whole: how long its unread bytes
# are read and dropped after the answer (then it is closed), and at most how many.
LINGER_S = 1.0
LINGER_BYTES = 1 << 20
# On stop: how long an idle connection may still start a request (answered, then closed).
LAST_CALL_S = 1.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the run loop owns the signals


def connection_cap(limit: int, nofile: int) -> int:
    """The connections PORT may hold: ``limit`` (LB_MAX_CONNECTIONS), lowered so that two
    descriptors for each, the health port's, the refusals' and ``FD_SPARE`` fit under the
    process's file-descriptor limit ``nofile``."""
    fixed = FD_SPARE + HEALTH_CONNECTIONS + HEALTH_RESERVE + 2 * REFUSING
    return max(1, min(limit, (nofile - fixed) // 2))


def raise_nofile() -> int:
    """Raise the soft file-descriptor limit to the hard one (capped at 2**20); return the
    soft limit in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard if hard != resource.RLIM_INFINITY else 1 << 20, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        return soft
    return wanted


class Guard:
    """One port's limits, shared by its connections."""

    def __init__(self, port: int, limits: Limits, connections: int, health_path: str | None):
        self.port = port
        self.limits = limits
        self.connections = connections
        # PORT_HEALTH == PORT: the path a connection past the cap may still ask.
        self.health_path = health_path
        self._logged: dict[int, float] = {}
        self.refused: dict[int, int] = {}

    def refused_one(self, status: int) -> None:
        """Count a refusal; log the first of each status per 10 s (a flood stays quiet)."""
        self.refused[status] = self.refused.get(status, 0) + 1
        now = time.monotonic()
        if now - self._logged.get(status, -1e9) >= 10:
            self._logged[status] = now
            log.warning("lb.refused", port=self.port, status=status, so_far=self.refused[status])

    async def busy(self, scope, receive, send) -> None:
        """The app for a connection past the cap asking anything but the health path."""
        await respond(send, bodies.too_many_connections(self.connections))


class _Refused(Exception):
    def __init__(self, answer: bodies.Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


def _raw(answer: bodies.Answer) -> bytes:
    """``answer`` as a whole HTTP/1.1 response."""
    lines = [f"HTTP/1.1 {answer.status} {_REASON.get(answer.status, '')}".encode()]
    lines += [name + b": " + value for name, value in answer.headers]
    lines.append(b"content-length: " + str(len(answer.body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + answer.body


_REASON = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class _CycleTransport:
    """The transport a request's cycle writes to: its close is the protocol's gentle one
    (a lingering close when the request was not read whole)."""

    def __init__(self, protocol: GuardedHttp) -> None:
        self._protocol = protocol
        self._transport = protocol.transport

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._protocol.close_gently()


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of a public port (module doc)."""

    guard: Guard  # set on the subclass made for each port (``_protocol``)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # bytes arriving now are a request's line and headers
        self._head_begun = False  # a request's first byte came, its head is not complete
        self._head_bytes = 0
        self._head_count = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._stopping = False
        self._closing = False  # answered or refused: what still arrives is dropped
        self._dropped = 0
        # The request body: not all read yet; its declared length (None: chunked); the
        # bytes seen; those dropped after an early answer.
        self._body_pending = False
        self._body_declared: int | None = None
        self._body_seen = 0
        self._discarded = 0
        self._health_only = False

    # -- connections

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        guard, held = self.guard, len(self.connections)
        if held > guard.connections:
            reserve = HEALTH_RESERVE if guard.health_path is not None else 0
            if held <= guard.connections + reserve:
                self._health_only = True
            elif held <= guard.connections + reserve + REFUSING:
                self._refuse(bodies.too_many_connections(guard.connections))
                return
            else:  # no room to linger: the answer, and the descriptor back at once
                guard.refused_one(503)
                self._closing = True
                transport.write(_raw(bodies.too_many_connections(guard.connections)))
                transport.close()
                return
        self._arm_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        for timer in self._timers:
            timer.cancel()
        super().connection_lost(exc)

    def eof_received(self) -> None:
        if self._closing:
            self.transport.close()

    # -- bytes in

    def data_received(self, data: bytes) -> None:
        if self._closing:
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.transport.close()
            return
        self._unset_keepalive_if_required()
        if self._in_head:
            limits = self.guard.limits
            room = limits.header_bytes - self._head_bytes
            if len(data) > room:
                self._head_bytes = limits.header_bytes
                if not self._feed(data[:room]):
                    return
                if self._in_head:
                    self._refuse(bodies.headers_too_large(limits.header_bytes, limits.header_count))
                    return
                data = data[room:]
            else:
                self._head_bytes += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> bool:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.answer)
            else:
                log.warning("lb.parse_failed", error=repr(refused))
                self._refuse(bodies.bad_request())
            return False
        except httptools.HttpParserUpgrade:
            return False  # no protocol is upgraded to (ws is off): the request goes on as HTTP
        except httptools.HttpParserError:
            self._refuse(bodies.bad_request())
            return False
        return True

    # -- parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = self._head_begun = True
        self._head_count = 0
        if self._deadline is None:
            self._arm_deadline()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_count += 1
        limits = self.guard.limits
        if self._head_count > limits.header_count:
            raise _Refused(bodies.headers_too_large(limits.header_bytes, limits.header_count))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = self._head_begun = False
        self._head_bytes = 0
        self._cancel_deadline()
        self._body_pending, self._body_seen, self._discarded = True, 0, 0
        self._body_declared = _declared_length(self.headers)
        if self._health_only:
            path = httptools.parse_url(self.url).path.decode("latin-1")
            wanted = path == self.guard.health_path
            self.app = self.config.loaded_app if wanted else self.guard.busy
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not before:
            self.cycle.transport = _CycleTransport(self)  # type: ignore[assignment]
            self.cycle.send = self._answer_start(self.cycle)  # type: ignore[method-assign]
            if self._stopping:
                self.cycle.keep_alive = False

    def _answer_start(self, cycle):
        """The cycle's ``send``: an answer that starts while more than ``LINGER_BYTES`` of
        the body are still to come says ``connection: close`` (the rest is not read)."""
        send = cycle.send

        async def guarded(message) -> None:
            if message["type"] == "http.response.start" and self._body_pending:
                left = self._body_declared
                if left is None or left - self._body_seen > LINGER_BYTES:
                    cycle.keep_alive = False
            await send(message)

        return guarded

    def on_body(self, body: bytes) -> None:
        self._body_seen += len(body)
        if self.cycle is not None and self.cycle.response_complete:
            # Answered before the body was read: drop the rest, up to LINGER_BYTES.
            self._discarded += len(body)
            if self._discarded > LINGER_BYTES:
                self.transport.close()
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_pending = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._closing:
            self.server_state.total_requests += 1
            return
        if self._body_pending:
            # Answered before the body was read: the rest is dropped as it comes (at most
            # LINGER_BYTES, within the header timeout), then the connection goes on.
            timeout = self.guard.limits.header_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._body_late))
        super().on_response_complete()

    def _body_late(self) -> None:
        if self._body_pending and self.cycle is not None and self.cycle.response_complete:
            self.transport.close()

    # -- timers, refusals, closing

    def _arm_deadline(self) -> None:
        self._cancel_deadline()
        timeout = self.guard.limits.header_timeout_s
        self._deadline = self.loop.call_later(timeout, self._head_late)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        if self._in_head and not (self.cycle is not None and not self.cycle.response_complete):
            self._refuse(bodies.header_timeout(self.guard.limits.header_timeout_s))

    def _refuse(self, answer: bodies.Answer) -> None:
        """Answer ``answer`` before any app saw the request, then close (lingering)."""
        if self._closing or self.transport.is_closing():
            return
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        self.guard.refused_one(answer.status)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer is under way on this connection: cut it
            return
        self.transport.write(_raw(answer))
        self._linger()

    def close_gently(self) -> None:
        """Close; when the request's bytes were not all read, linger first."""
        if self._closing or self.transport.is_closing():
            return
        unread = self._head_begun or self._body_pending
        if unread:
            self._linger()
        else:
            self.transport.close()

    def _linger(self) -> None:
        self._closing = True
        self._cancel_deadline()
        self.flow.resume_reading()
        try:
            self.transport.write_eof()
        except (OSError, RuntimeError, NotImplementedError):
            self.transport.close()
            return
        self._timers.append(self.loop.call_later(LINGER_S, self.transport.close))

    def shutdown(self) -> None:
        """The server stops: answer what is under way or arriving, then close."""
        self._stopping = True
        if self._closing:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        elif not self._head_begun:
            self._timers.append(self.loop.call_later(LAST_CALL_S, self._close_if_idle))
        # else: a head is arriving; it is answered once in (or at the header deadline)

    def _close_if_idle(self) -> None:
        in_flight = self.cycle is not None and not self.cycle.response_complete
        if not (self._closing or self._head_begun or in_flight or self.transport.is_closing()):
            self.transport.close()


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The body length a request declared: its Content-Length, 0 without one, None when
    chunked (unknown)."""
    names = {name for name, _ in headers}
    if b"transfer-encoding" in names:
        return None
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return 0


def _protocol(guard: Guard) -> type[GuardedHttp]:
    return type("GuardedHttp", (GuardedHttp,), {"guard": guard})


class _HealthThread:
    """PORT_HEALTH's server on a thread and event loop of its own."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.done = threading.Event()
        self.failed = False

    def start(self) -> None:
        threading.Thread(target=self._main, name="lb-health", daemon=True).start()

    def _main(self) -> None:
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self.server.serve())
        except SystemExit:  # uvicorn could not bind the port (it logged why)
            self.failed = True
        except Exception:
            log.exception("lb.health_crashed")
            self.failed = True
        finally:
            self.done.set()

    def stop(self, timeout_s: float) -> None:
        self.server.should_exit = True
        self.done.wait(timeout_s)


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
    if not shared:
        guard = Guard(endpoint.health_port, endpoint.limits, HEALTH_CONNECTIONS, None)
        health_thread = _HealthThread(_Server(_config(health, endpoint.health_port, grace, guard)))
        health_thread.start()
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            code = runner.run(
                _serve(supervisor, settings, endpoint, interrupted, health, health_thread, cap)
            )
    except SystemExit:  # uvicorn could not bind a port (it logged why)
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
        http=_protocol(guard),
        ws="none",  # nothing is upgraded: vLLM's routes are plain HTTP
    )


async def _serve(
    supervisor: Supervisor,
    settings: Settings,
    endpoint: Endpoint,
    interrupted: threading.Event,
    health: HealthApp,
    health_thread: _HealthThread | None,
    cap: int,
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
        serving = [asyncio.ensure_future(server.serve()) for server in servers]
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
    health_thread: _HealthThread | None,
) -> Iterator[None]:
    """SIGTERM/SIGINT set ``stop``; a second one ends the drain at once. The previous
    handlers come back afterwards (main's: a late signal still stops vLLM)."""

    def handler(signum, _frame) -> None:
        log.info("worker.signal", signal=signal.Signals(signum).name, phase="serving")
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
