"""The fork server (``tests/support/zygote.py``) starts a worker as ``python -m worker``
would: the same answer and log, its own session, the environment it was given (a byte
that is not UTF-8 too), the working folder, the limit on open files, and the exit
status ``Popen`` would report, also for a signal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from tests.support import zygote
from tests.support.queue_server import QueueServer
from tests.support.vllm_env import ROOT, events, free_port, running_worker, worker_env

BAD = "\udcff"  # os.environ's form of the byte 0xff


@contextlib.contextmanager
def _started(tmp_path, monkeypatch, fork_server: bool, **extra: str) -> Iterator[tuple]:
    """A queue and a worker on it (forked or plain), started with RLIMIT_NOFILE 512; on
    the way out the worker's group is killed if it still runs, then the queue closed."""
    monkeypatch.setenv("WORKER_FORK_SERVER", "1" if fork_server else "0")
    settings = {"MODEL_NAME": "stand-in/model", **extra}
    with QueueServer() as queue:
        env = worker_env(
            tmp_path,
            WORKER_MODE="queue",
            PORT=str(free_port()),
            PORT_HEALTH=str(free_port()),
            **settings,  # a setting the worker refuses: failed-permanent, serving jobs
            **queue.env(),
        )
        with running_worker(env, tmp_path, nofile=512) as proc:
            yield queue, proc


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "plain"])
def test_a_forked_worker_is_the_worker_python_would_start(tmp_path, monkeypatch, fork_server):
    with _started(tmp_path, monkeypatch, fork_server, MODEL_NAME=f"org/a{BAD}b") as (queue, proc):
        done = queue.wait_done(queue.submit({"prompt": "x"}), 30)
        assert proc.poll() is None  # failed-permanent: it stays up
        process = psutil.Process(proc.pid)
        assert os.getpgid(proc.pid) == proc.pid  # a session of its own
        assert process.cwd() == str(ROOT)
        assert process.rlimit(psutil.RLIMIT_NOFILE) == (512, 512)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert "MODEL_NAME" in done["error"]  # the byte that is not UTF-8 reached the worker
    assert [e["event"] for e in events(tmp_path)] == [
        "worker.state_changed",
        "worker.failed",
        "worker.taking_jobs",
        "job.answered_with_failure",
        "worker.signal",
        "job.take_cancelled_at_stop",
    ]


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "plain"])
def test_a_signal_ends_a_forked_worker_as_popen_reports_it(tmp_path, monkeypatch, fork_server):
    with _started(tmp_path, monkeypatch, fork_server, VLLM_PORT="0") as (queue, proc):
        queue.wait_done(queue.submit({"prompt": "x"}), 30)
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL
        assert proc.returncode == -signal.SIGKILL and proc.poll() == -signal.SIGKILL
        proc.send_signal(signal.SIGTERM)  # after its end: nothing to signal, no error


PROBE = """
import json, os, sys
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
    "session": os.getsid(0) == os.getpid(), "stdin": sys.stdin.read(),
    "main": __name__, "tty": sys.stdout.isatty(),
    "streams": [(type(s.buffer).__name__, s.line_buffering, s.write_through)
                for s in (sys.stdout, sys.stderr)],
}))
sys.stdout.flush()
os.write(int(os.environ["PROBE_FD"]), b"extra")
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ["PROBE_EXIT"]))
"""


def _programs(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    package = tmp_path / "probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text(PROBE)
    return {
        "-c": ["-c", PROBE, "one", "two"],
        "script": [str(script), "one"],
        "-m": ["-m", "probe_pkg.run", "one"],
    }


@pytest.mark.parametrize("form", ["-c", "script", "-m"])
def test_a_forked_program_is_the_program_python_would_run(tmp_path, form):
    """``python -c``/a script/``-m``: argv, sys.path[0], the working folder, the
    environment, a session of its own, stdin, a passed descriptor, both outputs and the
    exit status, the streams' buffering (unbuffered for the script), forked
    (``fork_server().popen``) as started (``subprocess.Popen``)."""
    argv = _programs(tmp_path)[form]
    seen = []
    for forked in (True, False):
        read, write = os.pipe()
        env = {**os.environ, "PROBE": "é", "PROBE_FD": str(write), "PROBE_EXIT": "3"}
        env["PYTHONPATH"] = str(tmp_path)
        env.pop("PYTHONUNBUFFERED", None)
        if form == "script":  # -u's streams: no buffer at all
            env["PYTHONUNBUFFERED"] = "1"
        streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        if forked:
            proc = zygote.fork_server().popen(argv, env, tmp_path, pass_fds=(write,), **streams)
        else:
            proc = subprocess.Popen(  # type: ignore[assignment]
                [sys.executable, *argv],
                env=env,
                cwd=tmp_path,
                pass_fds=(write,),
                start_new_session=True,
                **streams,
            )
        os.close(write)
        proc.stdin.write(b"input")
        proc.stdin.close()
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        with os.fdopen(read, "rb") as extra:
            seen.append((json.loads(out), err, extra.read(), proc.wait(30)))
    assert seen[0] == seen[1]
    probe, err, extra, code = seen[0]
    assert probe["env"] == "é" and probe["session"] and probe["stdin"] == "input"
    assert (err, extra, code) == (b"to stderr\n", b"extra", 3)


def test_a_forked_run_captures_as_subprocess_run(tmp_path):
    code = "import sys; print(sys.stdin.read() + 'out'); print('err', file=sys.stderr)"
    done = zygote.fork_server().run(["-c", code], dict(os.environ), tmp_path, input=b"in-")
    assert (done.returncode, done.stdout, done.stderr) == (0, "in-out\n", "err\n")
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.fork_server().run(["-c", "import time; time.sleep(60)"], {}, timeout=0.2)


def test_a_client_gone_mid_request_leaves_the_server_serving(tmp_path):
    """A connection closed before its line ends, or a line that is not a request, is
    dropped: the server goes on forking for everyone else (it serves every test process)."""
    server = zygote.fork_server()
    for partial in (b"", b'{"argv": ["-c"', b"not json\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(server.path)
            conn.sendall(partial)
    done = server.run(["-c", "print('still here')"], dict(os.environ), tmp_path)
    assert (done.returncode, done.stdout) == (0, "still here\n")
