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

It forks the tests' other Python programs too (``popen``/``run``: ``-c CODE``, ``-m
MODULE``, a script; what ``subprocess.Popen``/``run`` would start, with pipes and passed
descriptors): a program importing the RunPod SDK took 0.65 CPU-s started. What differs
from a fresh interpreter: the preloaded modules are there (a program must not be one of
them: ``-m worker.preflight.estimate`` stays a real start) and ``sys.path`` is the
server's, with the program's folder first (PYTHONPATH is read once, by the server).

Protocol, one connection per process on a Unix socket: the client sends one JSON line
(``argv``, ``env``, ``cwd``, ``nofile``, ``fds``: the numbers the descriptors sent with
the line take in the child, ``SCM_RIGHTS``; a worker is ``-m worker`` with its output
files as descriptors 1 and 2); the server answers ``<pid>\\n`` and, once that process has exited,
``<exit code>\\n`` (``-N`` for a signal, as ``Popen``). A connection whose line does not come within
``REQUEST_S``, or is not a request, is dropped. The server ends when its standard
input closes (the test process is gone).

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
import locale
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
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PRELOAD = (
    "worker.main",
    "worker.queue.gate",
    "worker.queue.handler",
    "worker.lb.serve",
    "worker.preflight.run",  # the pre-flight and its hub answers' schemas (pydantic)
    "worker.modelinfo.schema",
    "worker.queue.job_fetch",
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
    # huggingface_hub's and uvicorn's (not huggingface_hub: it reads HF_* when imported)
    "httpx2",
    "httpcore",
    "h11",
    "anyio._backends._asyncio",
    "annotated_types",
    "tomli",
    "uvicorn",
    "pynvml",
)

ROOT = Path(__file__).resolve().parents[2]
# A request's line comes right after its connection; one that does not come within this
# is dropped, so that one stalled client cannot hold up every other process's start or exit.
REQUEST_S = 10.0


def _request(conn: socket.socket) -> tuple[dict, list[int]]:
    """A request's JSON line and the descriptors sent with it (``SCM_RIGHTS``)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 16)
    try:
        while not data.endswith(b"\n"):
            more = conn.recv(1 << 16)
            if not more:
                raise OSError("a fork request ended before its end of line")
            data += more
        return json.loads(data), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _std_streams() -> None:
    """New ``sys.stdin``/``stdout``/``stderr`` on descriptors 0-2, buffered as a fresh
    interpreter's are (stderr by line; stdout by line on a terminal; with PYTHONUNBUFFERED
    neither, written straight to the descriptor)."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    reader = io.BufferedReader(io.FileIO(0, "r", closefd=False))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(reader, encoding=sys.stdin.encoding)
    for fd in (1, 2):
        raw = io.FileIO(fd, "w", closefd=False)
        old = sys.stdout if fd == 1 else sys.stderr
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),  # -u: no buffer, as CPython's
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
            write_through=unbuffered,
        )
        if fd == 1:
            sys.stdout = sys.__stdout__ = stream
        else:
            sys.stderr = sys.__stderr__ = stream


def _run_program(request: dict, fds: list[int]) -> int:
    """In the forked child: become ``python ARGV`` (``-c CODE``, ``-m MODULE`` or a script)
    with the descriptors sent, each at its target number, in a session of its own (and
    with RLIMIT_NOFILE at ``nofile``, when given), and run it."""
    os.setsid()
    os.chdir(request["cwd"])
    above = max(request["fds"]) + 1  # each moved out of every target's way first
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, above) for fd in fds]
    for fd in fds:
        os.close(fd)
    for fd, target in zip(high, request["fds"], strict=True):
        os.dup2(fd, target)
        os.close(fd)
    if request.get("nofile"):  # once the descriptors are in place (they may lie above it)
        limit = int(request["nofile"])
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    os.environ.clear()
    os.environ.update(request["env"])
    _std_streams()
    argv = request["argv"]
    return _exit_code(lambda: _run_argv(argv))


def _run_argv(argv: list[str]) -> None:
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    elif argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def _exit_code(run: Callable[[], object]) -> int:
    """Run ``run`` as an interpreter runs its program: the exit status of its SystemExit or
    of an uncaught exception, then threads joined, atexit run, streams flushed."""
    code = 0
    try:
        run()
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
                conn.settimeout(REQUEST_S)
                try:
                    request, fds = _request(conn)
                except (OSError, ValueError):  # a client gone mid-request: not the others' end
                    conn.close()
                    continue
                conn.settimeout(None)
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
                    os._exit(_run_program(request, fds))
                for fd in fds:
                    os.close(fd)
                waiting[pid] = conn
                with contextlib.suppress(OSError):  # the client is gone: its exit is still reaped
                    conn.sendall(b"%d\n" % pid)
        reap()


class Forked:
    """A process forked by the server: the part of ``subprocess.Popen`` the tests use
    (``pid``, ``poll``, ``wait``, ``returncode``, ``send_signal``, ``terminate``,
    ``kill``; ``stdin``/``stdout``/``stderr``, this process's end of a pipe it was given,
    else None)."""

    stdin: Any = None
    stdout: Any = None
    stderr: Any = None

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
        """``python -m worker`` from the repository root, its output in ``out`` and
        ``err``, standard input empty; ``nofile``: its RLIMIT_NOFILE, when given."""
        with out.open("wb") as out_file, err.open("wb") as err_file:
            return self.popen(
                ["-m", "worker"],
                env,
                ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=err_file,
                nofile=nofile,
            )

    def popen(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | Path = ROOT,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        pass_fds: tuple[int, ...] = (),
        nofile: int | None = None,
    ) -> Forked:
        """``subprocess.Popen([python, *argv], start_new_session=True, ...)``, forked: the
        streams are ``None`` (this process's), ``PIPE``, ``DEVNULL``, ``STDOUT`` (stderr),
        a descriptor or a file; a ``PIPE``'s end here is the child's ``stdin``/``stdout``/
        ``stderr`` (binary), as ``Popen`` gives it."""
        sent: list[int] = []
        ours: dict[int, int] = {}  # target -> this process's end of a pipe
        opened: list[int] = []  # descriptors opened here for the child: closed once sent
        for target, spec in ((0, stdin), (1, stdout), (2, stderr)):
            if spec is None:
                fd = target
            elif spec == subprocess.PIPE:
                read, write = os.pipe()
                fd, ours[target] = (read, write) if target == 0 else (write, read)
                opened.append(fd)
            elif spec == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                opened.append(fd)
            elif spec == subprocess.STDOUT:
                fd = sent[1]
            else:
                fd = spec if isinstance(spec, int) else spec.fileno()
            sent.append(fd)
        sent.extend(pass_fds)
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd),
            "fds": [0, 1, 2, *pass_fds],
            "nofile": nofile,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], sent)
            forked = Forked(conn, [sys.executable, *argv])
        except BaseException:
            conn.close()  # now: the server must not wait on a request that never comes
            raise
        finally:
            for fd in opened:
                os.close(fd)
        for target, fd in ours.items():
            stream = os.fdopen(fd, "wb" if target == 0 else "rb")
            setattr(forked, ("stdin", "stdout", "stderr")[target], stream)
        return forked

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | Path = ROOT,
        timeout: float | None = None,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``subprocess.run([python, *argv], capture_output=True, text=True, ...)``, forked."""
        proc = self.popen(
            argv,
            env,
            cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        outputs: dict[str, bytes] = {}

        def drain(name: str, stream: Any) -> None:
            with stream:
                outputs[name] = stream.read()

        readers = [
            threading.Thread(target=drain, args=(name, getattr(proc, name)), daemon=True)
            for name in ("stdout", "stderr")
        ]
        for reader in readers:
            reader.start()
        if proc.stdin is not None:
            with proc.stdin, contextlib.suppress(BrokenPipeError):
                proc.stdin.write(input or b"")
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        for reader in readers:
            reader.join()
        encoding = locale.getpreferredencoding(False)
        return subprocess.CompletedProcess(
            proc.args,
            code,
            outputs["stdout"].decode(encoding),
            outputs["stderr"].decode(encoding),
        )


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
