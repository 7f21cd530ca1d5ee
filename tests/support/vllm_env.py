"""Shared setup for tests that start real vLLM (CPU build) or the worker process.

Nothing here contacts an address outside 127.0.0.1: usage stats and telemetry are
off, the hub is offline or a loopback server, RunPod's network checks are skipped.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import resource
import secrets
import shlex
import signal
import socket
import string
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.zygote import fork_server

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
VLLM_COMMAND = f"{VLLM_PYTHON} -m vllm.entrypoints.openai.api_server"

needs_vllm = pytest.mark.skipif(
    not VLLM_PYTHON.exists(),
    reason=f"vLLM CPU build not installed at {VLLM_PYTHON} (scripts/setup-env)",
)


def planted_value(length: int = 24, prefix: str = "") -> str:
    """A random secret-looking value no output could contain by chance."""
    return prefix + "".join(
        secrets.choice(string.ascii_letters + string.digits) for _ in range(length)
    )


# Secrets of every name form, planted in every worker the tests start; conftest.py checks
# after each test that none appears in any output, log line or answer.
PLANTED_TOKEN = planted_value(34, "hf_")
PLANTED_ENV = {
    "HF_TOKEN": PLANTED_TOKEN,
    "OPENAI_API_KEY": planted_value(32, "sk-proj-"),
    "AWS_SECRET_ACCESS_KEY": planted_value(40),
    "SERVICE_PASSWORD": planted_value(20),
    "DEPLOY_CREDENTIALS": planted_value(24),
}

QUIET_ENV = {
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true",
    "RUNPOD_SKIP_GPU_CHECK": "true",
    "TOKENIZERS_PARALLELISM": "false",
}


# Ports handed to workers and stand-ins that bind them later. A port asked of the kernel
# (bind to port 0) and released comes from its ephemeral range, where the next outgoing
# connection of any process, or another test process's draw, may take it before the
# worker binds it: a worker that then fails to start (a CI flake of test_inputs.py's
# load-balancing worker). So each pytest-xdist process draws in turn from its own block
# below that range, and a port is handed out once per process.
PORT_BASE = 20_000
PORT_BLOCK = 1_500  # per pytest-xdist process: 8 processes stay below 32,768
_port_lock = threading.Lock()
_next_port = itertools.count()


def _port_block() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return PORT_BASE + (int(worker) % 8 if worker.isdigit() else 0) * PORT_BLOCK


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1, handed out once in this test process and
    outside the kernel's ephemeral range (see ``PORT_BASE``)."""
    block = _port_block()
    for _ in range(PORT_BLOCK):
        with _port_lock:
            port = block + next(_next_port) % PORT_BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # something else listens there (or a connection lingers)
                continue
        return port
    raise RuntimeError(f"no free port in {block}..{block + PORT_BLOCK - 1}")


def build_tiny_model(outdir: Path, variant: str = "ok") -> Path:
    subprocess.run(
        [str(VLLM_PYTHON), "-m", "tests.support.tiny_model", str(outdir), "--variant", variant],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return outdir


def worker_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Environment for a worker on the tiny model: small, eager, float32, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "HF_", "VLLM_"))}
    env.update(QUIET_ENV)
    env.update(
        VLLM_COMMAND=VLLM_COMMAND,
        VLLM_PORT=str(free_port()),
        MAX_MODEL_LEN="512",
        DTYPE="float32",
        ENFORCE_EAGER="true",
        GPU_MEMORY_UTILIZATION="0.25",
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp / "hf-home"),
        BASE_PATH=str(tmp / "no-volume"),
        VLLM_SHUTDOWN_GRACE="5",
        **PLANTED_ENV,
    )
    env.update(extra)
    return env


def tiny_model_env(tmp: Path, **extra: str) -> dict[str, str]:
    """``worker_env`` on a tiny random model built in ``tmp/model``."""
    return worker_env(tmp, MODEL_NAME=str(build_tiny_model(tmp / "model")), **extra)


def run_python(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``python ARGS`` (this interpreter) from the repository root, its output as text:
    forked from the fork server unless ``WORKER_FORK_SERVER=0`` (``ARGS`` must not run a
    module the server preloaded: ``-m worker...`` would run on the preloaded package)."""
    if os.environ.get("WORKER_FORK_SERVER", "1") != "0":
        return fork_server().run(args, env, ROOT, timeout=timeout)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def stand_in_argv(module: str, *args: str) -> list[str]:
    """``python -m tests.support.MODULE ARGS``: a stand-in for vLLM. The stand-ins use only
    the standard library, so they start without the site module (``-S``: the venv's
    ``.pth`` files, 15 of a start's 25 ms); the suite starts about a hundred."""
    return [sys.executable, "-S", "-m", f"tests.support.{module}", *args]


def stand_in(module: str, *args: str) -> str:
    """:func:`stand_in_argv` as a ``VLLM_COMMAND``."""
    return shlex.join(stand_in_argv(module, *args))


def stand_in_env(tmp: Path, command: str, **extra: str) -> dict[str, str]:
    """A worker environment whose vLLM is the stand-in process ``command``."""
    return worker_env(tmp, **{"MODEL_NAME": "stand-in/model", "VLLM_COMMAND": command, **extra})


def replay_env(tmp: Path, fixture: Path, **extra: str) -> dict[str, str]:
    """A worker environment whose vLLM is a stand-in (``tests.support.replay_log``) printing
    the recorded real log ``fixture`` and exiting 1: for failures that cannot happen here."""
    return stand_in_env(tmp, stand_in("replay_log", str(fixture), "1"), **extra)


def start_worker(env: dict[str, str], log_dir: Path, nofile: int | None = None) -> subprocess.Popen:
    """The worker as a process of its own, its output in log_dir/worker.out and .err;
    ``nofile``: its limit of open file descriptors (RLIMIT_NOFILE), when given.

    The process is forked from this test process's fork server (``tests.support.zygote``:
    the worker's imports done once), unless ``WORKER_FORK_SERVER=0`` asks for a plain
    ``python -m worker``."""
    if os.environ.get("WORKER_FORK_SERVER", "1") != "0":
        forked = fork_server().spawn(env, log_dir / "worker.out", log_dir / "worker.err", nofile)
        return forked  # type: ignore[return-value]  # the part of Popen the tests use
    limit_files = None
    if nofile is not None:  # set in the child before it runs the worker
        limit_files = functools.partial(
            resource.setrlimit, resource.RLIMIT_NOFILE, (nofile, nofile)
        )
    with (log_dir / "worker.out").open("wb") as out, (log_dir / "worker.err").open("wb") as err:
        return subprocess.Popen(  # the child keeps its own copies of the two files
            [sys.executable, "-m", "worker"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=out,
            stderr=err,
            preexec_fn=limit_files,
        )


@contextlib.contextmanager
def running_worker(
    env: dict[str, str], log_dir: Path, nofile: int | None = None
) -> Iterator[subprocess.Popen]:
    """``start_worker``; on the way out, its process group is killed if it still runs."""
    proc = start_worker(env, log_dir, nofile)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            if sys.exc_info()[0] is not None:  # the test failed with the worker running
                print(worker_stacks(proc, log_dir), file=sys.stderr)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def worker_stacks(proc: subprocess.Popen, log_dir: Path, wait_s: float = 5.0) -> str:
    """The end of a running worker's log with every thread's stack (``kill -USR1``:
    faulthandler writes them to its standard error), for a failed test's report."""
    err = log_dir / "worker.err"
    before = err.stat().st_size
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait_s
    text, seen = "", ""
    while time.monotonic() < deadline:
        text = err.read_bytes()[before:].decode(errors="replace")
        if "most recent call first" in text and text == seen:
            break  # written, and no longer growing
        seen = text
        time.sleep(0.2)  # polling a file: faulthandler gives no other sign it is done
    tail = err.read_bytes()[:before].decode(errors="replace").splitlines()[-40:]
    return "\n".join(["worker log, last lines:", *tail, "worker stacks:", text])


def events(log_dir: Path) -> list[dict]:
    """The worker's structlog events (JSON lines on stderr)."""
    found = []
    for line in (log_dir / "worker.err").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
    return found


def group_alive(pgid: int, settle_s: float = 5.0) -> bool:
    """True while a live (non-zombie) process is still in the group after ``settle_s``.

    A SIGKILLed process is gone only once the kernel has torn it down, a moment after
    the signal; the group is polled until it is empty or ``settle_s`` has passed, so a
    check right after a kill does not race that teardown. Zombies are ignored: orphans
    re-parented to a container's PID 1 may never be reaped."""
    deadline = time.monotonic() + settle_s
    while _group_has_live_process(pgid):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.01)  # polling /proc: there is no event for another group's exit
    return False


def _group_has_live_process(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
