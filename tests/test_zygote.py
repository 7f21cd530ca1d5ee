"""The fork server (``tests/support/zygote.py``) starts a worker as ``python -m worker``
would: the same answer and log, its own session, the environment it was given (a byte
that is not UTF-8 too), the working folder, the limit on open files, and the exit
status ``Popen`` would report, also for a signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator

import psutil
import pytest

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
