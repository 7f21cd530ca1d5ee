"""Every external input the worker reads around a start, with its bounds and what a
violation becomes, as data (``ROWS``) and walked: each row's hostile value is injected
into a worker process (stand-in vLLM, never real vLLM) in each of its modes, and the
worker must settle within ``SETTLE_S``, answer a job (queue mode) or a request and
``/ping`` (load-balancing mode) with a message naming the input, stay under
``RSS_LIMIT_MIB`` of RSS, and never show a planted secret.

``docs/reliability.md``'s input table is rendered from ``ROWS``
(``test_the_doc_shows_this_table``); ``RELIABILITY_DOC=1`` rewrites it.

A row runs in both modes where the modes' paths differ (every input of issue 23 §6: the
non-UTF-8 values, the rule pack, BASE_PATH; the pre-flight's hub refusals, which each
mode answers its own way); the other settings go through the one invalid-setting path
both modes share, and a hub answer the pre-flight cannot use is "unknown" in both alike
(vLLM decides): those run in one mode each, alternating, to keep the walk in seconds.

To add a row: append a ``Row`` (input, hostile value, modes, expected state, expected
text, and ``env`` or ``job`` or ``take`` or ``attack``; ``logged`` when what the worker
did is in its log rather than in an answer: a pre-flight's "unknown", a dropped job-take
element). A row whose fix is not in yet gets ``xfail="why"`` (run as
``xfail(strict=True)``: it fails the suite once it passes, to be flipped). All workers
run at once (``PARALLEL`` at a time), in well under a minute in all.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.hub_server import Body, Hostile, HubServer
from tests.support.loopback_http import loopback_client
from tests.support.model_configs import TINY_LLAMA
from tests.support.queue_server import QueueServer
from tests.support.raw_http import read_answer, status_of
from tests.support.vllm_env import PLANTED_ENV, ROOT, free_port, stand_in, start_worker, worker_env
from worker.queue.job_check import MAX_ID_LENGTH, MAX_SEEN_IDS

STANDIN = stand_in("vllm_standin")
SINK = f"{sys.executable} -m tests.worker.lb.sink_vllm"
SETTLE_S = 20.0  # from spawn to the answer, with every row's worker starting at once
RSS_LIMIT_MIB = 300  # the worker process (not its vLLM), sampled every 50 ms
PING_LIMIT_MS = 1000  # /ping on PORT_HEALTH during an HTTP client's attack
PARALLEL = 8
DEEP_LIMIT = 20_000  # this process's recursion limit while the rows run (a 3,000-deep job)
MiB = 1024 * 1024
DOC = ROOT / "docs" / "reliability.md"
BEGIN = "<!-- inputs: generated from tests/worker/test_inputs.py (ROWS); do not edit -->"
END = "<!-- end of inputs -->"

QUEUE, LB = "queue", "lb"
BOTH = (QUEUE, LB)
PERMANENT = "failed-permanent"
READY = "ready"
# The limits of the load-balancing worker the HTTP rows attack (short, so they run fast).
HTTP_LIMITS = {
    "LB_HEADER_TIMEOUT": "1",
    "LB_BODY_TIMEOUT": "1",
    "LB_MAX_BODY_BYTES": str(8 * MiB),
    "LB_MAX_CONNECTIONS": "8",
}


@dataclass(frozen=True)
class Row:
    """One external input: what it is, its bounds, a hostile value and what it becomes.

    ``env``: the environment the worker starts with (``{tmp}``, ``{hub}``, ``{bad}`` are
    filled in: a scratch folder, the loopback hub's URL, a byte that is not UTF-8).
    ``job``: the queue job's input (default: a plain prompt). ``take``: job-take
    elements handed out, as given, before that job (queue mode); each one with a string
    id must be answered exactly once, and the job after them still answered.
    ``attack``: for HTTP clients, the name of a function in ``ATTACKS`` run against a
    ready worker; it returns the answer's status and body. ``logged``: the worker's log
    must hold one of these texts (for what no answer shows)."""

    input: str
    source: str  # setting, filesystem, hub, nvml, queue, http
    bounds: str
    hostile: str
    modes: tuple[str, ...]
    state: str
    text: str  # the answer names the input with this
    env: Mapping[str, str] = field(default_factory=dict)
    job: object = None
    take: tuple[object, ...] = ()
    attack: str | None = None
    status: int | None = None  # HTTP rows: the status expected
    logged: tuple[str, ...] = ()
    xfail: str | None = None

    @property
    def id(self) -> str:
        return f"{self.source}:{self.input}:{self.hostile}"[:80]


BAD = "\udcff"  # os.environ's form of the byte 0xff, which is not UTF-8
PROMPT = {"prompt": "x"}
S = "setting"
FS = "filesystem"


def _refused(
    source: str, name: str, bounds: str, hostile: str, modes: tuple[str, ...], value: str
) -> Row:
    """``name`` (a setting, or a file a setting names) set to ``value``: failed-permanent,
    the answer naming it."""
    return Row(name, source, bounds, hostile, modes, PERMANENT, name, {name: value})


def _hub_answer(
    what: str,
    bounds: str,
    hostile: str,
    modes: tuple[str, ...],
    model: str,
    *logged: str,
    state: str = READY,
    text: str = "",
    endpoint: str = "{hub}",
) -> Row:
    """The pre-flight reading ``what`` for ``model`` from the hub at ``endpoint``."""
    env = {"MODEL_NAME": model, "HF_ENDPOINT": endpoint}
    return Row(f"hub: {what}", "hub", bounds, hostile, modes, state, text, env, logged=logged)


def _take(bounds: str, hostile: str, *elements: object, text: str = "", logged: str = "") -> Row:
    """Job-take ``elements`` handed out before the queue's job."""
    logs = (logged,) if logged else ()
    return Row(
        "job-take element",
        "queue",
        bounds,
        hostile,
        (QUEUE,),
        READY,
        text,
        take=elements,
        logged=logs,
    )


def _http(what: str, bounds: str, hostile: str, attack: str, status: int, text: str) -> Row:
    """An HTTP client's ``attack`` on a ready load-balancing worker: ``status``, naming ``text``."""
    return Row(what, "http", bounds, hostile, (LB,), READY, text, attack=attack, status=status)


ROWS: tuple[Row, ...] = (
    # -- settings: every one validated first; a bad one is failed-permanent naming it
    _refused(
        S, "MODEL_NAME", "UTF-8 text; a hub id or a path", "a byte 0xff", BOTH, "org/model{bad}"
    ),
    _refused(S, "HF_TOKEN", "UTF-8 text; never shown", "a byte 0xff", BOTH, "hf_abc{bad}def"),
    _refused(S, "VLLM_PORT", "integer 1-65535", "0", (QUEUE,), "0"),
    _refused(S, "MAX_CONCURRENCY", "integer >= 1, ASCII digits", "full-width '３'", (LB,), "３"),
    _refused(S, "VLLM_STARTUP_TIMEOUT", "seconds, > 0 and <= a week", "inf", (QUEUE,), "inf"),
    Row(
        "ENFORCE_EAGER (any vLLM flag)",
        S,
        "the flag's type (vLLM's parser snapshot)",
        "maybe",
        (LB,),
        PERMANENT,
        "ENFORCE_EAGER",
        {"ENFORCE_EAGER": "maybe"},
    ),
    _refused(S, "VLLM_EXTRA_ARGS", "shell words", "an unclosed quote", (QUEUE,), '--x "unclosed'),
    _refused(S, "HEALTH_CHECK_PATH", "an absolute URL path", "no-slash", BOTH, "no-slash"),
    _refused(S, "LB_MAX_BODY_BYTES", "integer 1 - 2^40", "0", (QUEUE,), "0"),
    # -- files the settings name
    _refused(
        FS,
        "RULES_PATH",
        "a regular file or a folder of *.yaml, <= 16 MiB",
        "/nonexistent",
        BOTH,
        "/nonexistent",
    ),
    _refused(
        FS,
        "RULES_PATH",
        "a regular file or a folder of *.yaml, <= 16 MiB",
        "/dev/zero",
        BOTH,
        "/dev/zero",
    ),
    _refused(
        FS,
        "RULES_PATH",
        "a pack that validates",
        "a rule with a broken regex",
        BOTH,
        "{tmp}/broken-rules",
    ),
    _refused(
        FS,
        "BASE_PATH",
        "a folder the worker may search, or absent; names <= 255 bytes",
        "a 300-byte name",
        BOTH,
        "{tmp}/" + "v" * 300,
    ),
    _refused(
        FS,
        "BASE_PATH",
        "a folder the worker may search, or absent",
        "a regular file",
        BOTH,
        "{tmp}/a-file",
    ),
    _refused(FS, "BAKED_MODEL_MANIFEST", "a JSON file <= 1 MiB", "/dev/zero", (LB,), "/dev/zero"),
    _refused(
        FS,
        "VLLM_CONFIG_FILE",
        "a regular *.yaml file",
        "a FIFO named config.yaml (a read would block)",
        (LB,),
        "{tmp}/fifo/config.yaml",
    ),
    # -- the hub's answers (pre-flight; PREFLIGHT_TIMEOUT per call)
    _hub_answer(
        "model info",
        "PREFLIGHT_TIMEOUT per call",
        "401 RepoNotFound",
        BOTH,
        "org/missing",
        state=PERMANENT,
        text="org/missing",
    ),
    _hub_answer(
        "model info",
        "PREFLIGHT_TIMEOUT per call",
        "403 GatedRepo",
        BOTH,
        "org/gated",
        state=PERMANENT,
        text="HF_TOKEN",
    ),
    _hub_answer("model info", "PREFLIGHT_TIMEOUT per call", "503 on every call", (LB,), "org/down"),
    _hub_answer(
        "the hub itself",
        "PREFLIGHT_TIMEOUT per call",
        "nothing listening",
        (QUEUE,),
        "org/ok",
        endpoint="http://127.0.0.1:9",
    ),
    _hub_answer(
        "config.json",
        "2 MiB decoded (MAX_CONFIG_BYTES), inflated with a cap",
        "gzip: 64 KiB on the wire, 64 MiB decoded",
        (QUEUE,),
        "org/gzip-config",
        "config.json is larger than 2 MiB (decoded)",
    ),
    _hub_answer(
        "model info",
        "8 MiB decoded (MAX_INFO_BYTES), 20,000 files (MAX_FILES)",
        "10^6 files",
        (LB,),
        "org/many-files",
        "model info is larger than 8 MiB (decoded)",
    ),
    _hub_answer(
        "model info",
        "PREFLIGHT_TIMEOUT for all requests together",
        "a byte every 50 ms, never ending",
        (QUEUE,),
        "org/trickle",
        "(PREFLIGHT_TIMEOUT)",
        "model info was still arriving at the deadline",
    ),
    _hub_answer(
        "model info",
        "a size an integer 0 - 1 TiB, 32 TiB in all",
        "a size of -10^15",
        (LB,),
        "org/negative-size",
        "the model info is not plausible",
    ),
    _hub_answer(
        "config.json",
        "strict JSON; positions an integer 1 - 2^32",
        "max_position_embeddings: NaN",
        (QUEUE,),
        "org/nan-config",
        "config.json is not JSON",
    ),
    _hub_answer(
        "model info",
        "the answer's text redacted (HF_TOKEN never shown)",
        "403 echoing the Authorization header",
        BOTH,
        "org/echo",
        state=PERMANENT,
        text="Access denied for Bearer",
    ),
    # -- NVML (the pre-flight's GPU inventory)
    Row(
        "NVML",
        "nvml",
        "absent is no error",
        "no driver (this machine)",
        (QUEUE,),
        READY,
        "",
        {"MODEL_NAME": "org/ok", "HF_ENDPOINT": "{hub}"},
    ),
    # -- the queue's jobs
    Row(
        "job input",
        "queue",
        "nested <= 500 levels",
        "nested 3,000 levels",
        (QUEUE,),
        READY,
        "nested deeper than",
        job={"messages": "{deep}"},
    ),
    Row(
        "job input",
        "queue",
        "a JSON object",
        "a list",
        (QUEUE,),
        READY,
        "must be a JSON object",
        job=[1, 2],
    ),
    _take("a JSON object with an id", "no id", {"input": PROMPT}, logged="the job has no id"),
    _take(
        f"an id: a string of 1 - {MAX_ID_LENGTH} URL-path characters",
        "an integer id",
        {"id": 7, "input": PROMPT},
        logged="its id is a number, not a string",
    ),
    _take(
        f"an id not taken before (the last {MAX_SEEN_IDS:,} remembered)",
        "the same id twice",
        {"id": "twice", "input": PROMPT},
        {"id": "twice", "input": PROMPT},
        logged="its id was taken before: a duplicate",
    ),
    _take("an input (a JSON object)", "no input", {"id": "no-input"}, text="The job has no input"),
    # -- HTTP clients of PORT (a ready worker; HTTP_LIMITS)
    _http(
        "request headers",
        "64 KiB, 100 headers",
        "one header of 50 MiB",
        "huge_header",
        431,
        "headers are too large",
    ),
    _http(
        "request headers",
        "64 KiB, 100 headers",
        "101 headers",
        "many_headers",
        431,
        "headers are too large",
    ),
    _http(
        "request headers",
        "LB_HEADER_TIMEOUT",
        "a byte every 0.3 s",
        "slow_headers",
        408,
        "LB_HEADER_TIMEOUT",
    ),
    _http(
        "request body",
        "LB_BODY_TIMEOUT without a byte",
        "stopped after 1 byte",
        "stalled_body",
        408,
        "LB_BODY_TIMEOUT",
    ),
    _http(
        "request body",
        "LB_MAX_BODY_BYTES, streamed",
        "chunked, never ending",
        "endless_body",
        413,
        "LB_MAX_BODY_BYTES",
    ),
    _http(
        "request body",
        "LB_MAX_BODY_BYTES, streamed",
        "Content-Length: 1 TiB",
        "declared_body",
        413,
        "LB_MAX_BODY_BYTES",
    ),
    _http(
        "request line",
        "HTTP/1.1, a path",
        "bytes that are not HTTP",
        "not_http",
        400,
        "not valid HTTP",
    ),
    _http(
        "request line",
        "a path starting with /",
        "*@127.0.0.1:1/x",
        "not_a_path",
        400,
        "must be a path",
    ),
    _http(
        "request line", "ASCII", "a byte 0xff in the path", "non_ascii_path", 400, "not valid HTTP"
    ),
    _http(
        "connections",
        "LB_MAX_CONNECTIONS, fitted to nofile",
        "20 idle at once",
        "connection_flood",
        503,
        "overloaded",
    ),
)


# -- HTTP attacks: each against a ready worker's PORT; returns (status, body)


def _parse(answer: bytes) -> tuple[int | None, str]:
    status = status_of(answer)
    if status is None:
        return None, answer[:200].decode("latin-1")
    return status, answer.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")


def _send(port: int, data: bytes, then: Callable[[socket.socket], None] | None = None):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        if then is not None:
            then(sock)
        return _parse(read_answer(sock))


def _until_answered(port: int, head: bytes, filler: bytes, total: int):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        sent = len(head)
        with contextlib.suppress(OSError):
            while sent < total and not select.select([sock], [], [], 0)[0]:
                sock.sendall(filler)
                sent += len(filler)
        return _parse(read_answer(sock))


def _slow(sock: socket.socket) -> None:
    for _ in range(5):
        time.sleep(0.3)
        with contextlib.suppress(OSError):
            sock.sendall(b"X")


def _flood(port: int):
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(20)]
    try:
        time.sleep(0.2)
        answers = []
        for sock in socks:
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                answers.append(sock.recv(65536))
        refused = [a for a in answers if a]
        return _parse(refused[0]) if refused else (None, "")
    finally:
        for sock in socks:
            sock.close()


GET = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"
ATTACKS: dict[str, Callable[[int], tuple[int | None, str]]] = {
    "huge_header": lambda port: _until_answered(port, GET + b"X-Big: ", b"a" * 65536, 50 * MiB),
    "many_headers": lambda port: _send(
        port, GET + b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n"
    ),
    "slow_headers": lambda port: _send(port, GET, _slow),
    "stalled_body": lambda port: _send(
        port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"
    ),
    "endless_body": lambda port: _until_answered(
        port,
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"10000\r\n" + b"e" * 65536 + b"\r\n",
        64 * MiB,
    ),
    "declared_body": lambda port: _until_answered(
        port,
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (1 << 40),
        b"f" * 65536,
        64 * MiB,
    ),
    "not_http": lambda port: _send(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
    "not_a_path": lambda port: _send(port, b"GET *@127.0.0.1:1/x HTTP/1.1\r\nHost: x\r\n\r\n"),
    "non_ascii_path": lambda port: _send(port, b"GET /v1/\xff HTTP/1.1\r\nHost: x\r\n\r\n"),
    "connection_flood": _flood,
}


# -- running the workers


@dataclass
class Outcome:
    status: int | None = None  # LB: the request's (or the attack's) status
    ping: int | None = None  # LB: /ping's status
    ping_ms: float = 0.0  # LB HTTP rows: the slowest /ping during the attack
    answer: str = ""  # the error message (or the attack's body)
    error_type: str | None = None
    seconds: float = 0.0
    rss_mib: float = 0.0
    log: str = ""  # the worker's stderr and stdout
    problem: str | None = None  # what went wrong running the row


class _Rss:
    """The peak RSS of a process, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss / MiB)
            self._done.wait(0.05)

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak


def _fill(value: str, places: Mapping[str, str]) -> str:
    for name, filler in places.items():
        value = value.replace("{" + name + "}", filler)
    return value


def _deep(levels: int) -> object:
    nested: object = "x"
    for _ in range(levels):
        nested = [nested]
    return nested


def _spawn(env: dict[str, str], log_dir: Path) -> subprocess.Popen:
    log_dir.mkdir(parents=True, exist_ok=True)
    return start_worker(env, log_dir)


def _log(log_dir: Path) -> str:
    return "".join(
        (log_dir / name).read_text(errors="replace")
        for name in ("worker.err", "worker.out")
        if (log_dir / name).exists()
    )


def _message(done: object) -> tuple[str, str | None]:
    """A job's answer: the error's message and type, or the output as JSON."""
    error = done.get("error") if isinstance(done, dict) else None
    if error is None:
        return json.dumps(done)[:2000], None
    payload = json.loads(error)
    return payload["message"], payload["type"]


def _take_ids(row: Row) -> list[str]:
    """The string ids of the row's job-take elements, once each."""
    ids = (e.get("id") for e in row.take if isinstance(e, dict))
    return list(dict.fromkeys(i for i in ids if isinstance(i, str)))


def _taken(queue: QueueServer, row: Row) -> tuple[list[str], str | None]:
    """The answers to the row's job-take elements that have a string id, and what went
    wrong (an element answered other than exactly once)."""
    answers = []
    for job_id in _take_ids(row):
        record = queue.job(job_id)
        if record.done_count != 1:
            return answers, f"job-take element {job_id!r} answered {record.done_count} times"
        answers.append(_message(record.done)[0])
    return answers, None


def _end(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextlib.contextmanager
def _watched(env: dict[str, str], log_dir: Path, outcome: Outcome) -> Iterator[None]:
    """A worker started with ``env``, its RSS sampled; on the way out it is ended and
    ``outcome`` gets its peak RSS and its log."""
    proc = _spawn(env, log_dir)
    rss = _Rss(proc.pid)
    try:
        yield
    finally:
        outcome.rss_mib = rss.stop()
        _end(proc)
        outcome.log = _log(log_dir)


def _env(row: Row, mode: str, places: Mapping[str, str], tmp: Path) -> dict[str, str]:
    values = {k: _fill(v, places) for k, v in row.env.items()}
    if "HF_ENDPOINT" in values:
        values.setdefault("HF_HUB_OFFLINE", "0")
        values["PREFLIGHT_TIMEOUT"] = "3"
    extra = {"WORKER_MODE": mode, "PORT": str(free_port()), "PORT_HEALTH": str(free_port())}
    return worker_env(
        tmp,
        **{"MODEL_NAME": "stand-in/model", "VLLM_COMMAND": STANDIN, **extra, **values},
    )


def _run_queue(row: Row, env: dict[str, str], log_dir: Path) -> Outcome:
    outcome = Outcome()
    with QueueServer() as queue:
        env.update(queue.env())
        job_input = row.job if row.job is not None else PROMPT
        if job_input == {"messages": "{deep}"}:  # encoded under DEEP_LIMIT (``outcomes``)
            job_input = {"messages": _deep(3000)}
        queue.submit_raw(*row.take)  # taken before the job
        job = queue.submit(job_input)
        started = time.monotonic()
        with _watched(env, log_dir, outcome):
            try:
                done = queue.wait_done(job, SETTLE_S)
                outcome.seconds = time.monotonic() - started
                outcome.answer, outcome.error_type = _message(done)
                # The take's elements may still be answering (their job went to vLLM):
                # wait for each one's first answer; they are counted once the worker
                # has ended, so a second answer cannot come after the count.
                for job_id in _take_ids(row):
                    left = max(0.0, SETTLE_S - (time.monotonic() - started))
                    with contextlib.suppress(TimeoutError):
                        queue.wait_done(job_id, left)
            except TimeoutError as exc:
                outcome.problem = f"no answer within {SETTLE_S} s: {exc}"
        if outcome.problem is None:
            taken, outcome.problem = _taken(queue, row)
            outcome.answer = "\n".join([outcome.answer, *taken])
    return outcome


def _lb_ready(env: dict[str, str]) -> tuple[int | None, float]:
    health = int(env["PORT_HEALTH"])
    deadline = time.monotonic() + SETTLE_S
    with loopback_client(timeout=5) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                status = http.get(f"http://127.0.0.1:{health}/ping").status_code
                if status != 204:
                    return status, time.monotonic()
            time.sleep(0.05)
    return None, time.monotonic()


def _run_lb(row: Row, env: dict[str, str], log_dir: Path) -> Outcome:
    outcome = Outcome()
    started = time.monotonic()
    with _watched(env, log_dir, outcome):
        try:
            outcome.ping, settled = _lb_ready(env)
            outcome.seconds = settled - started
            if outcome.ping is None:
                outcome.problem = f"/ping never settled within {SETTLE_S} s"
                return outcome
            # PORT listens before the health port answers (worker/lb/serve.py).
            with loopback_client(timeout=10) as http:
                answer = http.post(f"http://127.0.0.1:{env['PORT']}/v1/completions", json={})
            outcome.status = answer.status_code
            with contextlib.suppress(ValueError, KeyError, TypeError):
                error = answer.json()["error"]
                outcome.answer, outcome.error_type = error["message"], error["type"]
            if not outcome.answer:
                outcome.answer = answer.text[:2000]
        except httpx.HTTPError as exc:
            outcome.problem = f"{type(exc).__name__}: {exc}"
    return outcome


def _run_attacks(rows: list[Row], tmp: Path) -> dict[str, Outcome]:
    """Every HTTP row against one ready load-balancing worker, one after another."""
    env = worker_env(
        tmp,
        MODEL_NAME="stand-in/model",
        VLLM_COMMAND=SINK,
        WORKER_MODE="lb",
        PORT=str(free_port()),
        PORT_HEALTH=str(free_port()),
        **HTTP_LIMITS,
    )
    port, health = int(env["PORT"]), int(env["PORT_HEALTH"])
    outcomes: dict[str, Outcome] = {}
    proc = _spawn(env, tmp / "http")
    rss = _Rss(proc.pid)
    try:
        ping, _ = _lb_ready(env)
        for row in rows:
            outcome = outcomes[row.id] = Outcome(ping=ping)
            if ping != 200:
                tail = _log(tmp / "http")[-3000:]
                outcome.problem = (
                    f"the worker never got ready (/ping {ping}); its log ends:\n{tail}"
                )
                continue
            pings: list[float] = []
            stop = threading.Event()

            def probe(pings: list[float] = pings, stop: threading.Event = stop) -> None:
                with loopback_client(timeout=10) as http:
                    while not stop.is_set():
                        began = time.monotonic()
                        with contextlib.suppress(httpx.HTTPError):
                            http.get(f"http://127.0.0.1:{health}/ping")
                        pings.append((time.monotonic() - began) * 1000)
                        stop.wait(0.05)

            prober = threading.Thread(target=probe, daemon=True)
            prober.start()
            began = time.monotonic()
            try:
                assert row.attack is not None
                outcome.status, outcome.answer = ATTACKS[row.attack](port)
            except OSError as exc:
                outcome.problem = f"{type(exc).__name__}: {exc}"
            outcome.seconds = time.monotonic() - began
            stop.set()
            prober.join()
            outcome.ping_ms = max(pings, default=0.0)
    finally:
        peak = rss.stop()
        for outcome in outcomes.values():
            outcome.rss_mib = peak
        _end(proc)
    return outcomes


def _prepare(tmp: Path) -> None:
    broken = tmp / "broken-rules"
    broken.mkdir()
    (broken / "10-x.yaml").write_text("rules:\n  - id: x\n    patterns: ['(unclosed']\n")
    (tmp / "a-file").write_text("not a folder\n")
    (tmp / "fifo").mkdir()
    os.mkfifo(tmp / "fifo" / "config.yaml")


def _hub(root: Path) -> HubServer:
    model = root / "repo"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_LLAMA))
    bomb = _gzip_zeros(64 * MiB)
    size = {"siblings": [{"rfilename": "model.safetensors", "size": -(10**15)}]}
    hostile = {  # the hub rows' hostile answers (tests/worker/preflight has them all)
        "org/gzip-config": Hostile(files={"config.json": Body(lambda: iter([bomb]), "gzip")}),
        "org/many-files": Hostile(info=Body(lambda: _many_files(10**6))),
        "org/trickle": Hostile(info=Body(lambda: iter(lambda: b" ", None), pause_s=0.05)),
        "org/negative-size": Hostile(info=size),
        "org/nan-config": Hostile(files={"config.json": Body(lambda: iter([NAN_CONFIG]))}),
        "org/echo": Hostile(echo_token=True),
    }
    repos = {"org/ok": model, "org/gated": model, "org/down": model}
    repos.update(dict.fromkeys(hostile, model))
    return HubServer(repos, gated={"org/gated"}, failing={"org/down": 503}, hostile=hostile)


NAN_CONFIG = (
    b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
    b'"max_position_embeddings": NaN}'
)


def _gzip_zeros(decoded: int) -> bytes:
    """A gzip body that inflates to ``decoded`` zero bytes."""
    pack = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join(pack.compress(bytes(MiB)) for _ in range(decoded // MiB)) + pack.flush()


def _many_files(count: int) -> Iterator[bytes]:
    """A model info listing ``count`` files (a multiple of 1,000), made while it is sent:
    each chunk of 1,000 names is one template with its thousands filled in, so that the
    hub sends at the speed of its socket even on a busy machine (formatting every name
    here made the 8 MiB cut come after PREFLIGHT_TIMEOUT there)."""
    template = b"".join(b'{"rfilename": "fTTTT%03d.json", "size": 1},' % i for i in range(1000))
    yield b'{"sha": "' + b"a" * 40 + b'", "siblings": ['
    for thousand in range(count // 1000):
        yield template.replace(b"TTTT", b"%04d" % thousand)
    yield b'{"rfilename": "config.json", "size": 10}]}'


def _cases() -> list[tuple[Row, str]]:
    return [(row, mode) for row in ROWS for mode in row.modes]


def _case_id(row: Row, mode: str) -> str:
    return f"{mode}-{row.id}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> Iterator[dict[str, Outcome]]:
    """Every row in every mode, run at once; keyed by ``_case_id``."""
    tmp = tmp_path_factory.mktemp("inputs")
    _prepare(tmp)
    results: dict[str, Outcome] = {}
    limit = sys.getrecursionlimit()
    # The queue server (this process) encodes the deep job; set once for every thread
    # and restored after, so that no other test in this process runs under it.
    sys.setrecursionlimit(max(limit, DEEP_LIMIT))
    with contextlib.ExitStack() as stack:
        stack.callback(sys.setrecursionlimit, limit)
        hub = stack.enter_context(_hub(tmp_path_factory.mktemp("hub")))
        places = {"tmp": str(tmp), "hub": hub.url, "bad": BAD}
        http_rows = [row for row in ROWS if row.attack is not None]
        cases = [(row, mode) for row, mode in _cases() if row.attack is None]
        # The hub rows first: they wait on the hub (up to PREFLIGHT_TIMEOUT).
        cases.sort(key=lambda case: case[0].source != "hub")

        def run(case: tuple[Row, str]) -> tuple[str, Outcome]:
            row, mode = case
            key = _case_id(row, mode)
            where = tmp / "runs" / str(abs(hash(key)))
            try:
                env = _env(row, mode, places, where)
                runner = _run_queue if mode == QUEUE else _run_lb
                return key, runner(row, env, where)
            except Exception as exc:  # reported by the row's test
                return key, Outcome(problem=f"{type(exc).__name__}: {exc}")

        with ThreadPoolExecutor(PARALLEL) as pool:
            attacks = pool.submit(_run_attacks, http_rows, tmp)
            for key, outcome in pool.map(run, cases):
                results[key] = outcome
            for row_id, outcome in attacks.result().items():
                results[f"{LB}-{row_id}"] = outcome
    yield results


def _params():
    for row, mode in _cases():
        marks = [pytest.mark.xfail(strict=True, reason=row.xfail)] if row.xfail else []
        yield pytest.param(row, mode, id=_case_id(row, mode), marks=marks)


@pytest.mark.parametrize(("row", "mode"), list(_params()))
def test_a_hostile_input_is_answered_within_bounds(outcomes, row: Row, mode: str):
    outcome = outcomes[_case_id(row, mode)]
    assert outcome.problem is None, outcome.problem
    assert outcome.rss_mib < RSS_LIMIT_MIB, outcome
    assert not [n for n, v in PLANTED_ENV.items() if v in outcome.answer], "a secret leaked"
    assert not [n for n, v in PLANTED_ENV.items() if v in outcome.log], "a secret in the log"
    if row.logged:
        assert any(text in outcome.log for text in row.logged), (row.logged, outcome.log[-3000:])
    if row.attack is not None:
        assert outcome.status == row.status, outcome
        assert row.text in outcome.answer, outcome
        assert outcome.ping == 200 and outcome.ping_ms < PING_LIMIT_MS, outcome
        return
    assert outcome.seconds < SETTLE_S, outcome
    assert row.text in outcome.answer, outcome
    if row.state == PERMANENT:
        if mode == LB:
            assert (outcome.ping, outcome.status) == (200, 503), outcome
        if row.source != "queue":
            assert outcome.error_type == "startup_error", outcome
    elif mode == LB:
        assert outcome.ping == 200 and outcome.status is not None, outcome


def test_a_broken_rule_pack_is_answered_in_both_modes(outcomes, reliability):
    """Was: exit 3 (and never an answer) for a missing, unreadable or broken RULES_PATH."""
    cases = [(r, m) for r, m in _cases() if r.input == "RULES_PATH"]
    assert len(cases) == 6
    for row, mode in cases:
        outcome = outcomes[_case_id(row, mode)]
        assert outcome.problem is None and "RULES_PATH" in outcome.answer, outcome
        assert outcome.error_type == "startup_error", outcome
    reliability(
        "broken rule pack (RULES_PATH: missing, /dev/zero, a rule with a broken regex)",
        "failed-permanent",
        "every job (queue) and request (load balancing, /ping 200) answered startup_error "
        "naming RULES_PATH and the file, rule and field; vLLM not started (the built-in "
        "pack runs the worker)",
    )


def test_every_input_is_answered_within_bounds(outcomes, reliability):
    ran = {_case_id(r, m): r for r, m in _cases() if not r.xfail}
    ok = [k for k in ran if outcomes[k].problem is None]
    assert ok == list(ran)
    slowest = max(outcomes[k].seconds for k in ran if ran[k].attack is None)
    peak = max(outcomes[k].rss_mib for k in ran)
    ping = max(outcomes[k].ping_ms for k in ran)
    reliability(
        f"the input table below: {len(ROWS)} inputs (settings, files, hub, NVML, the queue, "
        f"HTTP clients), {len(ran)} hostile cases in their modes, all at once",
        "as the table says",
        f"each answered naming its input; slowest settle {slowest:.1f} s (limit "
        f"{SETTLE_S:g}), peak worker RSS {peak:.0f} MiB (limit {RSS_LIMIT_MIB}), slowest "
        f"/ping under an HTTP attack {ping:.0f} ms; no planted secret in any answer or log",
    )


# -- the doc


def render(rows: tuple[Row, ...] = ROWS) -> str:
    head = (
        "| input | source | bounds | hostile value | modes | expected state | the answer "
        "names it with |\n|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for row in rows:
        state = row.state if row.status is None else f"{row.state}; {row.status}"
        text = f"`{row.text}`" if row.text else "(served as usual)"
        if row.logged:
            text += "; logged: " + " or ".join(f"`{logged}`" for logged in row.logged)
        note = f" (xfail: {row.xfail})" if row.xfail else ""
        cells = [row.input, row.source, row.bounds, row.hostile, ", ".join(row.modes), state]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + f" | {text}{note} |")
    return head + "\n".join(lines) + "\n"


def _doc_section() -> str | None:
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def test_the_doc_shows_this_table():
    if os.environ.get("RELIABILITY_DOC") == "1":
        text = DOC.read_text(encoding="utf-8")
        before, _, rest = text.partition(BEGIN)
        _, _, after = rest.partition(END)
        DOC.write_text(f"{before}{BEGIN}\n{render()}{END}{after}", encoding="utf-8")
    assert _doc_section() == render(), (
        "docs/reliability.md's input table is not ROWS: "
        "RELIABILITY_DOC=1 pytest tests/worker/test_inputs.py -k doc"
    )
