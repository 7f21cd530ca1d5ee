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

Hostile queues: ``submit_raw`` hands out job-take elements exactly as given (no id, a
number as id, ``null``, a string...), several in one batch, and ``answer_next`` answers
the next job-take with a whole body of any JSON (a batch that is not a list). Every
job-done is counted (``JobRecord.done_count``), so a job answered twice shows. A held
job-take whose client goes away (a worker cancelling its poll) is noticed while held:
it takes no job and is recorded with the outcome ``"client gone"``.
``stall_take_bodies`` makes job-take answers stop after their headers until
``release_take_bodies``: a worker stopped then holds an answer that has begun to arrive.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import select
import socket
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
    done_count: int = 0  # job-done POSTs recorded: more than 1 is a job answered twice


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


@dataclass(frozen=True)
class _Raw:
    """A job-take element handed out exactly as given (``submit_raw``)."""

    element: object


@dataclass(frozen=True)
class _Body:
    """A whole job-take answer body, given as is (``answer_next``)."""

    body: object


_CLIENT_GONE = object()  # _decide's body when the client left a held poll


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
        self._queue: deque[str | _Raw | _Body] = deque()
        self._jobs: dict[str, JobRecord] = {}
        self._stops: list[str] = []
        self._faults: list[_Fault] = []
        self._hits: list[Hit] = []
        self._held = {"job-take": 0, "job-stop": 0}  # polls being held open, by kind
        self._stall = False  # job-take answers with jobs wait after their headers
        self._unstall = threading.Event()
        self._stalled = 0
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
        """Stop serving; held long-polls answer 204 at once, stalled bodies go out."""
        with self._cond:
            self._closed.set()
            self._cond.notify_all()
        self._unstall.set()
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

    def submit_raw(self, *elements: object) -> None:
        """Queue ``elements`` at once (so one job-take-batch can carry them all), each
        handed out exactly as given. An element that is an object with a string ``id``
        gets a record under that id (unless one exists: a duplicate), so its answers are
        recorded; no check is made that the worker could use it."""
        with self._cond:
            for element in elements:
                self._record_raw(element)
                self._queue.append(_Raw(copy.deepcopy(element)))
            self._cond.notify_all()

    def answer_next(self, body: object) -> None:
        """Answer the next job-take (single or batch) with 200 and ``body`` as its whole
        JSON body, once every job queued before it has been taken. A body that is one
        object with a string ``id`` (the single job-take's shape) gets a record."""
        with self._cond:
            self._record_raw(body)
            self._queue.append(_Body(copy.deepcopy(body)))
            self._cond.notify_all()

    def _record_raw(self, element: object) -> None:
        job_id = element.get("id") if isinstance(element, dict) else None
        if isinstance(job_id, str) and job_id not in self._jobs:
            assert isinstance(element, dict)
            job_input = copy.deepcopy(element.get("input"))
            self._jobs[job_id] = JobRecord(job_id, job_input, time.monotonic())

    def stall_take_bodies(self) -> None:
        """From now on, a job-take answer with jobs sends its status and headers, then
        waits for ``release_take_bodies`` before its body."""
        with self._cond:
            self._stall = True
            self._unstall.clear()

    def release_take_bodies(self) -> None:
        """Send the stalled bodies, and stall no more."""
        with self._cond:
            self._stall = False
            self._unstall.set()

    @property
    def bodies_stalled(self) -> int:
        """How many job-take answers wait after their headers right now."""
        with self._cond:
            return self._stalled

    def _stall_body(self, kind: str, status: int) -> None:
        """Called between the headers and the body of every answer (handler thread)."""
        with self._cond:
            if not (self._stall and status == 200 and kind in ("job-take", "job-take-batch")):
                return
            self._stalled += 1
            self._cond.notify_all()
        self._unstall.wait()
        with self._cond:
            self._stalled -= 1
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        """How many jobs, elements and bodies wait to be taken."""
        with self._cond:
            return len(self._queue)

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
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        gone: Callable[[], bool] = lambda: False,
    ) -> tuple[int | None, object]:
        """Decide one answer: (status, JSON body); status None means drop the connection.
        ``gone()`` tells whether the client has closed its connection (for held polls).

        State changes and the request's Hit are made under one lock, so a test woken by
        a state change already sees the Hit.
        """
        routed = _route(method, path)
        kind, args = routed if routed else ("unknown", {})
        if kind in RESULT_KINDS and self.delay_s:
            self._closed.wait(self.delay_s)
        with self._cond:
            status, body = self._decide(kind, args, query, raw, gone)
            outcome: int | str = status if status is not None else "dropped"
            if body is _CLIENT_GONE:
                outcome = "client gone"
            self._hits.append(Hit(kind, method, path, query, time.monotonic(), outcome))
            self._cond.notify_all()
            return status, body

    def _decide(
        self,
        kind: str,
        args: dict[str, str],
        query: dict[str, str],
        raw: bytes,
        gone: Callable[[], bool],
    ) -> tuple[int | None, object]:
        if kind == "unknown":
            return 404, {"error": "no such route"}
        fault = self._fault_for(kind)
        if fault is not None:
            return fault.status, {"error": "injected fault"}
        if kind in ("job-take", "job-take-batch"):
            batch = kind == "job-take-batch"
            limit = max(1, int(query.get("batch_size", "1"))) if batch else 1
            jobs = self._take(args["worker"], limit, gone)
            if isinstance(jobs, _Body):
                return 200, jobs.body
            if not jobs:
                return (None, _CLIENT_GONE) if gone() else (204, None)
            return 200, jobs if batch else jobs[0]
        if kind in RESULT_KINDS:
            try:  # the SDK posts raw JSON text under a form content type
                body = json.loads(raw)
            except ValueError:
                return 400, {"error": "body is not JSON"}
            return self._record_result(kind, args["job"], body, query)
        if kind == "job-stop":
            if not self._stops and self.stop_hold_s > 0:
                self._hold_open("job-stop", lambda: self._stops, self.stop_hold_s, gone)
                if gone():
                    return None, _CLIENT_GONE
            stops, self._stops = self._stops, []
            return (200, {"jobsToStop": stops}) if stops else (204, None)
        return 200, {}  # ping

    def _fault_for(self, kind: str) -> _Fault | None:
        for i, fault in enumerate(self._faults):
            if kind in fault.kinds:
                return self._faults.pop(i)
        return None

    def _hold_open(
        self, kind: str, answer: Callable[[], object], hold_s: float, gone: Callable[[], bool]
    ) -> None:
        """Hold a poll of ``kind`` open (lock held) until ``answer()`` has something, the
        server closes, the client goes away (looked at every 50 ms), or ``hold_s`` has
        passed; counted in ``polls_held``/``stop_polls_held``."""
        self._held[kind] += 1
        self._cond.notify_all()
        deadline = time.monotonic() + hold_s
        try:  # wait releases the lock while it waits
            while not (answer() or self._closed.is_set() or gone()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.05))
        finally:
            self._held[kind] -= 1
            self._cond.notify_all()

    def _take(self, worker: str, limit: int, gone: Callable[[], bool]) -> list[Any] | _Body:
        """Pop up to ``limit`` jobs (or one whole body), holding the poll open while the
        queue is empty; a client gone while held takes nothing."""
        if not self._queue:
            self._hold_open("job-take", lambda: self._queue, self.hold_s, gone)
            if gone():
                return []
        if self._queue and isinstance(self._queue[0], _Body):
            body = self._queue.popleft()
            assert isinstance(body, _Body)
            self._mark_taken(body.body, worker)
            return body
        jobs: list[Any] = []
        while self._queue and len(jobs) < limit and not isinstance(self._queue[0], _Body):
            entry = self._queue.popleft()
            if isinstance(entry, _Raw):
                self._mark_taken(entry.element, worker)
                jobs.append(copy.deepcopy(entry.element))
            else:
                assert isinstance(entry, str)
                record = self._jobs[entry]
                self._mark_taken(record.id, worker)
                jobs.append({"id": record.id, "input": copy.deepcopy(record.input)})
        return jobs

    def _mark_taken(self, job: object, worker: str) -> None:
        """Record the take of ``job`` (an id, or an element/body with one) if it has a record."""
        job_id = job.get("id") if isinstance(job, dict) else job
        record = self._jobs.get(job_id) if isinstance(job_id, str) else None
        if record is not None:
            record.taken_at, record.taken_wall = time.monotonic(), time.time()
            record.taken_by = worker

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
            record.done_count += 1
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

        def _gone(self) -> bool:
            """Whether the client closed its end (readable, and nothing to read)."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _dispatch(self, method: str) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            query = dict(parse_qsl(parts.query))
            status, body = queue._handle(method, parts.path, query, raw, self._gone)
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
            routed = _route(method, parts.path)
            queue._stall_body(routed[0] if routed else "unknown", status)
            self.wfile.write(data)

    return Handler
