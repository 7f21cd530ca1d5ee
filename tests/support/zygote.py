"""A fork server for the worker processes the tests start (``python -m worker``).

A worker process spends most of its CPU importing (the worker's modules, structlog, httpx,
aiohttp and the RunPod SDK's other dependencies), and the suite starts about a hundred of
them. This process imports those modules once (``PRELOAD``) and forks a worker for each
request: a queue worker answering one job and stopping took 1.0 CPU-s started and 0.13
forked (measured 2026-12-02 on the 2-core test machine). Everything a worker does
still runs in a process of its own, from ``worker/__main__.py``, with the test's
environment, working folder, session and output files, as ``python -m worker`` would.

What stays out of ``PRELOAD``: every module that reads the environment when it is
imported (the RunPod SDK's own modules read the queue's URLs then, huggingface_hub reads
HF_ENDPOINT and HF_HOME): they are imported by each worker, after its environment is in
place. ``tests/test_zygote.py`` checks that a forked worker's environment, output
files, session, signals and exit status are those of a started one.

Protocol, one connection per worker on a Unix socket: the client sends one JSON line
(``env``, ``cwd``, ``out``, ``err``, ``nofile``); the server answers ``<pid>\\n`` and,
once that worker has exited, ``<exit code>\\n`` (``-N`` for a signal, as ``Popen``). The
server ends when its standard input closes (the test process is gone).

Usage (by ``tests.support.vllm_env.start_worker``): ``python -m tests.support.zygote SOCKET
LOCK_FD``; the server holds an exclusive ``flock`` on ``LOCK_FD`` until its socket listens.

Under pytest-xdist the controller starts one server for all its test processes
(``start_shared``, from ``tests/conftest.py``) without waiting for it, and names its
folder in ``TESTS_FORK_SERVER``: each test process waits on the lock (a shared ``flock``,
granted once the server let go of it) and connects. One server's imports instead of one
per test process: 0.7 CPU-s each (measured 2026-12-02).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import resource
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

PRELOAD = (
    "worker.main",
    "worker.queue.gate",
    "worker.queue.handler",
    "worker.lb.serve",
    # the RunPod SDK's dependencies (not the SDK: its modules read the environment)
    "aiohttp",
    "aiodns",
    "aiohttp_retry",
    "backoff",
    "requests",
    "paramiko",
    "tomlkit",
    "pydantic",
    "multiprocessing.managers",
    "tarfile",
    "cpuinfo",  # its import runs `file -b` on the interpreter and `uname -p`: 15 ms each time
)

ROOT = Path(__file__).resolve().parents[2]
WORKER_MAIN = ROOT / "worker" / "__main__.py"


def _run_worker(request: dict) -> int:
    """In the forked child: become the worker ``request`` describes and run it."""
    if request.get("nofile"):
        limit = int(request["nofile"])
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    os.setsid()
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.close(null)
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get("PYTHONUNBUFFERED"):  # as python -u builds it (the server's is buffered)
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False),
            encoding=sys.stdout.encoding,
            errors=sys.stdout.errors,
            write_through=True,
        )
    sys.argv = [str(WORKER_MAIN)]
    code = 0
    try:
        runpy.run_module("worker", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    # What an interpreter does on its way out: join threads, run atexit, flush.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def serve(path: str, lock: int) -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # the preloaded objects: never collected, so a worker's GC copies none of them
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    os.close(lock)  # lets the clients waiting on the lock connect
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}

    def reap() -> None:
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                conn.close()

    while True:
        for key, _ in selector.select():
            if key.fileobj == 0:
                if not os.read(0, 4096):
                    return
            elif key.fileobj == wake_r:
                while True:
                    try:
                        if not os.read(wake_r, 4096):
                            break
                    except BlockingIOError:
                        break
            else:
                conn, _ = listener.accept()
                with conn.makefile("rb") as reader:
                    line = reader.readline()
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    listener.close()
                    conn.close()
                    for other in waiting.values():
                        other.close()
                    os._exit(_run_worker(request))
                waiting[pid] = conn
                conn.sendall(b"%d\n" % pid)
        reap()


class Forked:
    """A worker forked by the server: the part of ``subprocess.Popen`` the tests use
    (``pid``, ``poll``, ``wait``, ``returncode``, ``send_signal``, ``terminate``,
    ``kill``). Its output is in the files it was given, never in pipes."""

    stdout = stderr = None

    def __init__(self, conn: socket.socket, args: list[str]) -> None:
        self._conn = conn
        self._buffer = b""
        self.args = args
        self.returncode: int | None = None
        pid = self._line(None)
        assert pid is not None  # without a timeout: a line, or OSError
        self.pid = int(pid)

    def _line(self, timeout: float | None) -> str | None:
        """The next line from the server; None when ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return None
            data = self._conn.recv(4096)
            if not data:
                raise OSError("the fork server ended before the worker did")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _settle(self, timeout: float | None) -> None:
        if self.returncode is None:
            line = self._line(timeout)
            if line is not None:
                self.returncode = int(line)
                self._conn.close()

    def poll(self) -> int | None:
        self._settle(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._settle(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


SHARED = "TESTS_FORK_SERVER"  # the folder of the server all test processes share


class _Client:
    """What a test process needs of a fork server: its socket, and ``spawn``."""

    path: str

    def spawn(self, env: dict[str, str], out: Path, err: Path, nofile: int | None) -> Forked:
        request = {
            "env": env,
            "cwd": str(ROOT),
            "out": str(out),
            "err": str(err),
            "nofile": nofile,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        conn.sendall(json.dumps(request).encode() + b"\n")
        return Forked(conn, [sys.executable, "-m", "worker"])


class ForkServer(_Client):
    """A server process started by this process (``wait``: until it listens)."""

    def __init__(self, wait: bool = True) -> None:
        self.folder = tempfile.mkdtemp(prefix="zygote-")
        self.path = os.path.join(self.folder, "socket")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", SHARED)}
        lock = os.open(os.path.join(self.folder, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held by the server (its copy) until it listens
            self._proc = subprocess.Popen(  # buffered output: each worker sets its own
                [sys.executable, "-m", "tests.support.zygote", self.path, str(lock)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                pass_fds=(lock,),
            )
        finally:
            os.close(lock)
        atexit.register(self.close)
        if wait:
            _wait_listening(self.folder)

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.folder, "lock"))
            os.rmdir(self.folder)


class SharedServer(_Client):
    """The server another process started (``start_shared``), once it listens."""

    def __init__(self, folder: str) -> None:
        self.path = _wait_listening(folder)


def _wait_listening(folder: str) -> str:
    """The socket of the server in ``folder``, once it listens (the server holds the
    lock until then; a shared ``flock`` is granted when it lets go)."""
    with open(os.path.join(folder, "lock"), "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
    path = os.path.join(folder, "socket")
    if not os.path.exists(path):
        raise OSError(f"the fork server in {folder} did not start")
    return path


def start_shared() -> ForkServer:
    """Start the server the test processes this process starts will share (the xdist
    controller's); they find it through ``TESTS_FORK_SERVER``."""
    server = ForkServer(wait=False)
    os.environ[SHARED] = server.folder
    return server


_server: _Client | None = None
_lock = threading.Lock()


def fork_server() -> _Client:
    """The fork server: the shared one when ``TESTS_FORK_SERVER`` names it, else this
    test process's own (started on first use)."""
    global _server
    with _lock:
        if _server is None:
            shared = os.environ.get(SHARED)
            _server = SharedServer(shared) if shared else ForkServer()
        return _server


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
