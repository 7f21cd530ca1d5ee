"""A RunPod-style job queue on 127.0.0.1, so tests can run the SDK's real job loop.

Owns the test side of the wire protocol in ``shared/notes/runpod-job-protocol.md``:
job-take (long-polled), job-take-batch, job-stream, job-done, job-stop and ping under
``/v2/ep/``. It records what the worker sends, per job, and can inject faults into the
result POSTs. Stdlib only (``http.server`` in a background thread); nothing here starts
the worker.

    with QueueServer() as queue:
        env = {**os.environ, **queue.env()}           # start the worker with this
        job_id = queue.submit({"prompt": "hi"})
        done = queue.wait_done(job_id, timeout=30)    # {"output": ...} or {"error": ...}

Waiting is event-based: every change notifies one condition variable, and
``wait_for`` / ``wait_done`` / ``wait_taken`` block on it with a deadline.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, urlsplit

__all__ = ["Hit", "JobRecord", "QueueServer"]

T = TypeVar("T")

# What each route is called in hits, faults and records.
RESULT_KINDS = ("job-done", "job-stream")
_ROUTES = {
    ("GET", "job-take"): re.compile(r"/v2/ep/job-take/(?P<worker>[^/]+)"),
    ("GET", "job-take-batch"): re.compile(r"/v2/ep/job-take-batch/(?P<worker>[^/]+)"),
    ("POST", "job-stream"): re.compile(r"/v2/ep/job-stream/(?P<worker>[^/]+)/(?P<job>[^/]+)"),
    ("POST", "job-done"): re.compile(r"/v2/ep/job-done/(?P<worker>[^/]+)/(?P<job>[^/]+)"),
    ("GET", "job-stop"): re.compile(r"/v2/ep/job-stop/(?P<worker>[^/]+)"),
    ("GET", "ping"): re.compile(r"/v2/ep/ping/(?P<worker>[^/]+)"),
}


@dataclass
class JobRecord:
    """One submitted job and everything the worker sent for it.

    Times ending in ``_at`` are ``time.monotonic()``; ``taken_wall`` is ``time.time()``.
    ``stream`` holds each job-stream body as parsed JSON (``{"output": chunk}``).
    """

    id: str
    input: object
    submitted_at: float
    taken_at: float | None = None
    taken_wall: float | None = None
    taken_by: str | None = None
    stream: list[Any] = field(default_factory=list)
    stream_at: list[float] = field(default_factory=list)
    done: Any = None
    done_at: float | None = None
    done_query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """One request the server answered (or dropped); ``outcome`` is the status or 'dropped'."""

    kind: str
    method: str
    path: str
    query: dict[str, str]
    at: float
    outcome: int | str


@dataclass
class _Fault:
    kinds: frozenset[str]
    status: int | None  # None: close the connection without answering


class QueueServer:
    """The queue: submit jobs, start a worker with ``env()``, read back what it sent.

    ``hold_s`` is how long an empty job-take is held open before 204 (the real queue
    long-polls; instant 204s make the SDK spin). A stopping worker waits for the poll
    on the wire (a job in its answer must still be run), so the default is short: each
    worker stop in the suite would otherwise wait about a second for it. ``stop_hold_s``
    holds an empty job-stop poll open the same way (0: answered at once). ``delay_s``
    delays the answer to every result POST (job-done, job-stream).
    """

    def __init__(
        self, *, hold_s: float = 0.2, stop_hold_s: float = 0.0, delay_s: float = 0.0
    ) -> None:
        self.hold_s = hold_s
        self.stop_hold_s = stop_hold_s
        self.delay_s = delay_s
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._ids = itertools.count(1)
        self._queue: deque[str] = deque()
        self._jobs: dict[str, JobRecord] = {}
        self._stops: list[str] = []
        self._faults: list[_Fault] = []
        self._hits: list[Hit] = []
        self._held = {"job-take": 0, "job-stop": 0}  # polls being held open, by kind
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        # A short poll interval so close() returns promptly (serve_forever's default is 0.5 s).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="queue-server", daemon=True
        )
        self._started = False

    # -- lifecycle --------------------------------------------------------------------

    # Every server started in this process, for the suite-wide secret check (conftest).
    started: ClassVar[list[QueueServer]] = []

    def start(self) -> QueueServer:
        QueueServer.started.append(self)
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def close(self) -> None:
        """Stop serving; held long-polls answer 204 at once."""
        with self._cond:
            self._closed.set()
            self._cond.notify_all()
        if self._started:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> QueueServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self, worker_id: str = "worker-1") -> dict[str, str]:
        """The environment that points the runpod SDK at this queue (set before import)."""
        base = f"{self.url}/v2/ep"
        return {
            "RUNPOD_WEBHOOK_GET_JOB": f"{base}/job-take/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_POST_OUTPUT": f"{base}/job-done/$RUNPOD_POD_ID/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_POST_STREAM": f"{base}/job-stream/$RUNPOD_POD_ID/$ID?gpu=TEST",
            "RUNPOD_WEBHOOK_PING": f"{base}/ping/$RUNPOD_POD_ID",
            "RUNPOD_POD_ID": worker_id,
            "RUNPOD_AI_API_KEY": "test-api-key",
            # Offline the SDK's built-in checks fail (one opens TCP to 8.8.8.8:53).
            "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true",
            "RUNPOD_SKIP_GPU_CHECK": "true",
        }

    # -- test side --------------------------------------------------------------------

    def submit(self, job_input: object, job_id: str | None = None) -> str:
        """Queue a job; the next job-take gets it. Returns its id."""
        with self._cond:
            job_id = job_id or f"job-{next(self._ids)}"
            if job_id in self._jobs:
                raise ValueError(f"job id {job_id!r} already submitted")
            self._jobs[job_id] = JobRecord(job_id, copy.deepcopy(job_input), time.monotonic())
            self._queue.append(job_id)
            self._cond.notify_all()
        return job_id

    def stop_job(self, job_id: str) -> None:
        """Make the next job-stop poll answer ``{"jobsToStop": [job_id, ...]}``."""
        with self._cond:
            self._stops.append(job_id)
            self._cond.notify_all()

    def fail_next(self, n: int, status: int = 500, kinds: Iterable[str] = RESULT_KINDS) -> None:
        """Answer the next ``n`` requests of ``kinds`` with ``status`` and record nothing."""
        self._add_faults(n, status, kinds)

    def drop_connections(self, n: int, kinds: Iterable[str] = RESULT_KINDS) -> None:
        """Close the connection of the next ``n`` requests of ``kinds`` without answering."""
        self._add_faults(n, None, kinds)

    def _add_faults(self, n: int, status: int | None, kinds: Iterable[str]) -> None:
        known = {kind for _, kind in _ROUTES}
        kinds = frozenset(kinds)
        if not kinds <= known:
            raise ValueError(f"unknown kinds {sorted(kinds - known)}; known: {sorted(known)}")
        with self._cond:
            self._faults.extend(_Fault(kinds, status) for _ in range(n))

    @property
    def results(self) -> dict[str, Any]:
        """The job-done body of every finished job, by id."""
        with self._cond:
            return {j.id: copy.deepcopy(j.done) for j in self._jobs.values() if j.done_at}

    def job(self, job_id: str) -> JobRecord:
        """A copy of everything recorded for ``job_id``."""
        with self._cond:
            return copy.deepcopy(self._jobs[job_id])

    def taken_at(self, job_id: str) -> float | None:
        """When (``time.monotonic()``) a worker took the job; None if not yet."""
        with self._cond:
            return self._jobs[job_id].taken_at

    def done_at(self, job_id: str) -> float | None:
        """When (``time.monotonic()``) the job-done POST arrived; None if not yet."""
        with self._cond:
            return self._jobs[job_id].done_at

    @property
    def polls_held(self) -> int:
        """How many job-take requests are being held open right now."""
        with self._cond:
            return self._held["job-take"]

    @property
    def stop_polls_held(self) -> int:
        """How many job-stop polls are being held open right now."""
        with self._cond:
            return self._held["job-stop"]

    def hits(self, kind: str | None = None) -> list[Hit]:
        """Requests answered (or dropped) so far, optionally only those of one kind."""
        with self._cond:
            return [h for h in self._hits if kind is None or h.kind == kind]

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str = "condition") -> T:
        """Block until ``predicate()`` (called under the lock) is truthy; return its value."""
        with self._cond:
            value = self._cond.wait_for(predicate, timeout)
        if not value:
            raise TimeoutError(f"{what} not met within {timeout} s")
        return value

    def wait_done(self, job_id: str, timeout: float) -> Any:
        """Block until the job-done POST for ``job_id`` arrives; return its body."""
        try:
            record = self.wait_for(
                lambda: self._jobs[job_id].done_at is not None and self._jobs[job_id],
                timeout,
                f"job-done for {job_id}",
            )
        except TimeoutError as exc:
            state = self.job(job_id)
            raise TimeoutError(
                f"{exc} (taken_at={state.taken_at}, stream chunks={len(state.stream)}, "
                f"hits={[(h.kind, h.outcome) for h in self.hits() if h.kind != 'ping'][-10:]})"
            ) from None
        return copy.deepcopy(record.done)

    def wait_taken(self, job_id: str, timeout: float) -> float:
        """Block until a worker takes ``job_id``; return when (monotonic)."""
        return self.wait_for(lambda: self._jobs[job_id].taken_at, timeout, f"{job_id} taken")

    # -- server side (called from handler threads) -----------------------------------

    def _handle(
        self, method: str, path: str, query: dict[str, str], raw: bytes
    ) -> tuple[int | None, object]:
        """Decide one answer: (status, JSON body); status None means drop the connection.

        State changes and the request's Hit are made under one lock, so a test woken by
        a state change already sees the Hit.
        """
        routed = _route(method, path)
        kind, args = routed if routed else ("unknown", {})
        if kind in RESULT_KINDS and self.delay_s:
            self._closed.wait(self.delay_s)
        with self._cond:
            status, body = self._decide(kind, args, query, raw)
            outcome = "dropped" if status is None else status
            self._hits.append(Hit(kind, method, path, query, time.monotonic(), outcome))
            self._cond.notify_all()
            return status, body

    def _decide(
        self, kind: str, args: dict[str, str], query: dict[str, str], raw: bytes
    ) -> tuple[int | None, object]:
        if kind == "unknown":
            return 404, {"error": "no such route"}
        fault = self._fault_for(kind)
        if fault is not None:
            return fault.status, {"error": "injected fault"}
        if kind in ("job-take", "job-take-batch"):
            batch = kind == "job-take-batch"
            limit = max(1, int(query.get("batch_size", "1"))) if batch else 1
            jobs = self._take(args["worker"], limit)
            if not jobs:
                return 204, None
            return 200, jobs if batch else jobs[0]
        if kind in RESULT_KINDS:
            try:  # the SDK posts raw JSON text under a form content type
                body = json.loads(raw)
            except ValueError:
                return 400, {"error": "body is not JSON"}
            return self._record_result(kind, args["job"], body, query)
        if kind == "job-stop":
            if not self._stops and self.stop_hold_s > 0:
                self._hold_open("job-stop", lambda: self._stops, self.stop_hold_s)
            stops, self._stops = self._stops, []
            return (200, {"jobsToStop": stops}) if stops else (204, None)
        return 200, {}  # ping

    def _fault_for(self, kind: str) -> _Fault | None:
        for i, fault in enumerate(self._faults):
            if kind in fault.kinds:
                return self._faults.pop(i)
        return None

    def _hold_open(self, kind: str, answer: Callable[[], object], hold_s: float) -> None:
        """Hold a poll of ``kind`` open (lock held) until ``answer()`` has something, the
        server closes, or ``hold_s`` has passed; counted in ``polls_held``/``stop_polls_held``."""
        self._held[kind] += 1
        self._cond.notify_all()
        try:  # wait_for releases the lock while it waits
            self._cond.wait_for(lambda: answer() or self._closed.is_set(), hold_s)
        finally:
            self._held[kind] -= 1

    def _take(self, worker: str, limit: int) -> list[dict]:
        """Pop up to ``limit`` jobs, holding the poll open while the queue is empty."""
        if not self._queue:
            self._hold_open("job-take", lambda: self._queue, self.hold_s)
        jobs = []
        while self._queue and len(jobs) < limit:
            record = self._jobs[self._queue.popleft()]
            record.taken_at, record.taken_wall = time.monotonic(), time.time()
            record.taken_by = worker
            jobs.append({"id": record.id, "input": copy.deepcopy(record.input)})
        return jobs

    def _record_result(
        self, kind: str, job_id: str, body: Any, query: dict[str, str]
    ) -> tuple[int, object]:
        record = self._jobs.get(job_id)
        if record is None:
            return 404, {"error": "unknown job"}
        if kind == "job-stream":
            record.stream.append(body)
            record.stream_at.append(time.monotonic())
        else:
            record.done, record.done_at, record.done_query = body, time.monotonic(), query
        return 200, {}


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops connections when 30 jobs post at once,
    # and a dropped SYN is retried after 1 s.
    request_queue_size = 128


def _route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for (route_method, kind), pattern in _ROUTES.items():
        match = pattern.fullmatch(path)
        if match and route_method == method:
            return kind, match.groupdict()
    return None


def _make_handler(queue: QueueServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # the SDK's aiohttp session keeps connections alive
        # Headers and body go out in two writes: without TCP_NODELAY the body waits for
        # the client's delayed ACK (~40 ms) on a kept-alive connection.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet; hits() has the record

        def _dispatch(self, method: str) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, body = queue._handle(method, parts.path, dict(parse_qsl(parts.query)), raw)
            if status is None:
                self.close_connection = True  # no answer at all: the client sees EOF
                return
            self.send_response(status)
            if status == 204:
                self.end_headers()
                return
            data = json.dumps(body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
