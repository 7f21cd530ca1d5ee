"""The hub's download-size read and the pre-flight never hold the worker's exit
(``in_daemon_thread`` in ``worker/supervision/follower.py``).

A hub that trickles its model info keeps ``download_bytes`` reading for its whole 10 s
timeout. Read through the loop's default executor, ``asyncio.run`` waited for it when the
supervisor's loop closed, and the worker's exit after SIGTERM with it (up to
VLLM_SHUTDOWN_GRACE + 5 s). Now a SIGTERM in the middle of the read: the worker exits
within VLLM_SHUTDOWN_GRACE and a small margin, as with a hub that answers at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time

import pytest

from tests.support.hub_server import Body, Hostile, HubServer, write_repo
from tests.support.vllm_env import events, stand_in, stand_in_env, start_worker
from worker.supervision.follower import in_daemon_thread

GRACE_S = 2  # VLLM_SHUTDOWN_GRACE; before the fix the exit took GRACE_S + 5 s here
MARGIN_S = 3  # the stop itself: vLLM's stand-in ends at once on SIGTERM
REPO = "org/trickle"
STANDIN = stand_in("vllm_standin", "--loading")


def _trickle() -> Body:
    return Body(lambda: iter(lambda: b" ", None), pause_s=0.05)  # a space every 50 ms


@pytest.mark.parametrize(
    "preflight",
    [
        pytest.param("false", id="the follower's size read"),
        # The pre-flight reads the model's files from the hub first (PREFLIGHT_TIMEOUT
        # 10 s): before it ran in a daemon thread, the exit waited for its timeout.
        pytest.param("true", id="the pre-flight"),
    ],
)
def test_a_trickling_hub_never_holds_the_exit_after_sigterm(tmp_path, preflight):
    repo = write_repo(tmp_path / "repo", {"config.json": '{"model_type": "llama"}'})
    hostile = {REPO: Hostile(info=_trickle())}
    with HubServer({REPO: repo}, hostile=hostile) as hub:
        env = stand_in_env(
            tmp_path,
            STANDIN,
            MODEL_NAME=REPO,  # a repo id, online: the follower reads its size from the hub
            HF_ENDPOINT=hub.url,
            PREFLIGHT=preflight,  # "false": only the follower's read asks the hub
            VLLM_SHUTDOWN_GRACE=str(GRACE_S),
        )
        env.pop("HF_HUB_OFFLINE")
        proc = start_worker(env, tmp_path)
        try:
            deadline = time.monotonic() + 60
            # Polled: the hub's request log has no event to wait on.
            while not any(f"/api/models/{REPO}" in r.path for r in hub.requests):
                assert proc.poll() is None, (tmp_path / "worker.err").read_text()
                assert time.monotonic() < deadline, "the follower never asked the hub"
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGTERM)  # the size read is trickling now
            try:
                code = proc.wait(GRACE_S + MARGIN_S)
            except subprocess.TimeoutExpired:
                code = None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    assert code == 0, f"no exit within {GRACE_S + MARGIN_S} s of SIGTERM (exit code {code})"
    seen = [e.get("event") for e in events(tmp_path)]
    assert "worker.signal" in seen
    # Stopped during the pre-flight, vLLM is never spawned; else it was, and it stopped.
    assert ("vllm.spawned" in seen) is (preflight == "false")


def test_in_daemon_thread_hands_over_the_result_and_the_error():
    async def calls() -> None:
        assert await in_daemon_thread(divmod, 7, 2) == (3, 1)
        with pytest.raises(ZeroDivisionError):
            await in_daemon_thread(divmod, 1, 0)

    asyncio.run(calls())


def test_a_cancelled_call_holds_neither_the_loop_nor_its_close():
    release = threading.Event()

    async def cancelled() -> None:
        task = asyncio.ensure_future(in_daemon_thread(release.wait))
        await asyncio.sleep(0)  # the task has started its thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(cancelled())  # returns with the call still blocked (to_thread's waits)
        blocked = [t for t in threading.enumerate() if t.name == "worker-wait"]
        assert blocked and all(t.daemon and t.is_alive() for t in blocked)
    finally:
        release.set()
