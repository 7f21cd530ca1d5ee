"""Event-driven job intake (``worker/queue/intake.py``) in the real RunPod SDK job loop.

Each test runs a worker subprocess: ``worker.queue.intake.start`` (the SDK's own
``runpod.serverless.start`` with our scaler) against the loopback queue server. Its
event loop has a frozen clock: no ``sleep``, tick or timeout can ever end, so a job
is only taken, started and answered if the loop reacts to events. The SDK's own scaler
polls every 0.1 s and answers nothing here. The clock thaws at SIGTERM so the SDK's
stop (whose stop-signal loop sleeps between polls) can finish.

The worker's handler holds a job (``{"hold": true}``) until the test writes
``release <id>`` on the worker's stdin; the worker reports ``ready``, ``start <id>
<in flight>`` and ``stopping`` on a pipe. Assertions are on event order and counts,
never on durations.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.queue_server import QueueServer
from tests.support.zygote import fork_server

REPO = Path(__file__).resolve().parents[3]
DEADLINE = 30.0  # generous: a worker process starts in well under a second here

DRIVER = r"""
import asyncio
import collections
import os
import signal
import sys

from worker.queue import intake

MAX = int(os.environ["INTAKE_MAX"])
if "INTAKE_LANDING_S" in os.environ:
    intake.TAKE_LANDING_S = float(os.environ["INTAKE_LANDING_S"])
events = os.fdopen(int(os.environ["INTAKE_EVENTS_FD"]), "w", buffering=1)


class FrozenClockLoop(asyncio.SelectorEventLoop):
    thawed = False
    frozen_at = None

    def time(self):
        now = super().time()
        if FrozenClockLoop.thawed:
            return now
        if FrozenClockLoop.frozen_at is None:
            FrozenClockLoop.frozen_at = now
        return FrozenClockLoop.frozen_at


class Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self):
        return FrozenClockLoop()


releases = collections.defaultdict(asyncio.Event)
in_flight = peak = 0
ready = False


def on_stdin():
    for line in os.read(0, 65536).decode().splitlines():
        releases[line.split()[1]].set()


def on_term(signum, frame, sdk_handler):
    FrozenClockLoop.thawed = True
    events.write("stopping\n")
    sdk_handler(signum, frame)


def modifier(current):
    # Called by the SDK's fetch loop, inside its event loop, before every job-take.
    global ready
    if not ready:
        ready = True
        asyncio.get_running_loop().add_reader(0, on_stdin)
        sdk_handler = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, lambda n, f: on_term(n, f, sdk_handler))
        events.write("ready\n")
    return MAX


async def handler(job):
    global in_flight, peak
    in_flight += 1
    peak = max(peak, in_flight)
    events.write(f"start {job['id']} {in_flight}\n")
    try:
        if job["input"].get("hold"):
            await releases[job["id"]].wait()
        return {"in_flight": in_flight, "peak": peak}
    finally:
        in_flight -= 1


asyncio.set_event_loop_policy(Policy())
intake.start({"handler": handler, "concurrency_modifier": modifier})
events.write("exited\n")
from worker.main import exit_now

exit_now(0)
"""


class Driven:
    """The worker subprocess: its stdin (releases) and its event pipe."""

    def __init__(self, queue: QueueServer, max_concurrency: int, log: Path, **extra: str):
        read_fd, write_fd = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
        env.update(queue.env(), INTAKE_MAX=str(max_concurrency), INTAKE_EVENTS_FD=str(write_fd))
        env.update(extra)
        env["RUNPOD_DEBUG_LEVEL"] = "INFO"
        self.log = log
        with log.open("wb") as out:  # the child keeps its own copy
            # Forked from the fork server (the SDK is imported by the child, after its
            # environment is in place, as in a fresh interpreter).
            self.proc = fork_server().popen(
                ["-c", DRIVER],
                env,
                REPO,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
            )
        os.close(write_fd)
        self._events = os.fdopen(read_fd, "rb", buffering=0)
        self._buffer = b""
        self.seen: list[str] = []

    def wait_event(self, wanted: str) -> str:
        """Block until an event starting with ``wanted`` arrives; return it."""
        deadline = time.monotonic() + DEADLINE
        while True:
            for line in self.seen:
                if line.startswith(wanted):
                    self.seen.remove(line)
                    return line
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._events], [], [], max(left, 0))
            if not ready:
                raise TimeoutError(f"no {wanted!r} event; worker log:\n{self.tail()}")
            chunk = self._events.read(65536)
            if not chunk:
                raise RuntimeError(f"worker closed its events; log:\n{self.tail()}")
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            self.seen.extend(line.decode() for line in lines)

    def release(self, job_id: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"release {job_id}\n".encode())
        self.proc.stdin.flush()

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def wait_logged(self, text: str) -> None:
        """Block until the worker's log holds ``text`` (read every 20 ms)."""
        deadline = time.monotonic() + DEADLINE
        while text not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not logged; worker log:\n{self.tail()}")
            time.sleep(0.02)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(DEADLINE)
        self._events.close()
        if self.proc.stdin:
            self.proc.stdin.close()


@contextlib.contextmanager
def driven(
    queue: QueueServer, max_concurrency: int, tmp_path: Path, **extra: str
) -> Iterator[Driven]:
    worker = Driven(queue, max_concurrency, tmp_path / "worker.log", **extra)
    try:
        worker.wait_event("ready")
        yield worker
    finally:
        worker.close()


def test_jobs_start_on_events_up_to_the_concurrency(tmp_path):
    with QueueServer() as queue, driven(queue, 3, tmp_path) as worker:
        # A job arriving while idle is taken and answered with the clock frozen: no tick.
        idle = queue.submit({})
        assert queue.wait_done(idle, DEADLINE)["output"]["peak"] == 1

        held = [queue.submit({"hold": True}) for _ in range(5)]
        for job in held[:3]:
            worker.wait_event(f"start {job} ")
        worker.release(held[0])
        queue.wait_done(held[0], DEADLINE)
        # The freed slot is refilled by the job's end, not by a sleep: the 4th job was
        # taken only after the 1st was answered (the fetch loop waited while full).
        worker.wait_event(f"start {held[3]} ")
        assert queue.job(held[3]).taken_at > queue.job(held[0]).done_at
        for job in held[1:]:
            worker.release(job)
        answers = [queue.wait_done(job, DEADLINE) for job in held]
        assert max(a["output"]["peak"] for a in answers) == 3  # reached, never exceeded
        assert queue.job(held[4]).taken_at > min(queue.job(j).done_at for j in held[:3])

        os.killpg(worker.proc.pid, signal.SIGTERM)
        worker.wait_event("exited")
        assert worker.proc.wait(DEADLINE) == 0


def _takes(queue: QueueServer) -> list[object]:
    return [h.outcome for h in queue.hits() if h.kind in ("job-take", "job-take-batch")]


def test_a_stop_cancels_a_job_take_the_queue_holds_open(tmp_path):
    # A hold far past DEADLINE: only the worker giving the poll up ends it in time (the
    # SDK waited it out, up to its 90 s bound, and took jobs meanwhile).
    with QueueServer(hold_s=DEADLINE * 10) as queue, driven(queue, 3, tmp_path) as worker:
        running = queue.submit({"hold": True})
        worker.wait_event(f"start {running} ")
        queue.wait_for(lambda: queue.polls_held == 1, DEADLINE, "a job-take on the wire")
        os.killpg(worker.proc.pid, signal.SIGTERM)
        worker.wait_event("stopping")
        queue.wait_for(lambda: queue.polls_held == 0, DEADLINE, "the held job-take ended")
        assert _takes(queue)[-1] == "client gone"
        late = queue.submit({})  # after the stop: left for another worker
        worker.release(running)  # a job in flight still finishes
        assert queue.wait_done(running, DEADLINE)["output"]["peak"] == 1
        worker.wait_event("exited")
        assert worker.proc.wait(DEADLINE) == 0
        assert queue.job(late).taken_at is None
        assert queue.queued == 1


def test_a_job_take_answering_at_the_stop_is_still_run(tmp_path):
    # The queue has sent the answer's headers when the stop comes: its jobs are taken,
    # so the worker reads the body (TAKE_LANDING_S, long here) and runs them.
    with (
        QueueServer(hold_s=DEADLINE * 10) as queue,
        driven(queue, 3, tmp_path, INTAKE_LANDING_S=str(DEADLINE)) as worker,
    ):
        running = queue.submit({"hold": True})
        worker.wait_event(f"start {running} ")
        queue.wait_for(lambda: queue.polls_held == 1, DEADLINE, "a job-take on the wire")
        queue.stall_take_bodies()
        late = queue.submit({})
        queue.wait_for(lambda: queue.bodies_stalled == 1, DEADLINE, "an answer under way")
        os.killpg(worker.proc.pid, signal.SIGTERM)
        worker.wait_logged("job.take_landing_at_stop")
        queue.release_take_bodies()
        assert queue.wait_done(late, DEADLINE)["output"]["peak"] == 2
        worker.release(running)
        queue.wait_done(running, DEADLINE)
        worker.wait_event("exited")
        assert worker.proc.wait(DEADLINE) == 0


def test_an_answer_that_never_lands_is_cut_at_the_stop(tmp_path):
    # A queue that sends headers and then nothing cannot hold the stop: TAKE_LANDING_S
    # (0.2 s here, on a clock that runs from the stop) bounds the wait.
    with (
        QueueServer(hold_s=DEADLINE * 10) as queue,
        driven(queue, 3, tmp_path, INTAKE_LANDING_S="0.2") as worker,
    ):
        queue.stall_take_bodies()
        lost = queue.submit({})
        queue.wait_for(lambda: queue.bodies_stalled == 1, DEADLINE, "an answer under way")
        os.killpg(worker.proc.pid, signal.SIGTERM)
        worker.wait_event("exited")
        assert worker.proc.wait(DEADLINE) == 0
        assert "job.take_cut_at_stop" in worker.log.read_text()
        assert queue.job(lost).done_at is None  # taken, never answered: logged as cut


def test_a_stop_poll_held_open_does_not_hold_the_exit(tmp_path):
    # The SDK waits for its per-job stop poll at the stop; a queue that holds that poll
    # open would keep the worker alive past DEADLINE (the SDK bounds the poll at 90 s).
    with QueueServer(stop_hold_s=DEADLINE * 10) as queue, driven(queue, 3, tmp_path) as worker:
        job = queue.submit({})
        queue.wait_done(job, DEADLINE)
        queue.wait_for(lambda: queue.stop_polls_held == 1, DEADLINE, "a job-stop poll held")
        os.killpg(worker.proc.pid, signal.SIGTERM)
        worker.wait_event("exited")
        assert worker.proc.wait(DEADLINE) == 0
        # The worker gave the poll up (it did not wait for its answer).
        queue.wait_for(lambda: queue.stop_polls_held == 0, DEADLINE, "the stop poll ended")
        assert queue.hits("job-stop")[-1].outcome == "client gone"


# What worker/queue/intake.py stands on in runpod 1.12.0 (pinned in pyproject.toml): the
# methods it overrides or calls, and run_worker, which builds ``rp_scale.JobScaler``.
SDK_VERSION = "1.12.0"
SDK_SOURCES = {
    "JobScaler.__init__": "a6f8e34dff6a9dce",
    "JobScaler.set_scale": "e137f173c456d41b",
    "JobScaler.start": "1be10193840eb9d5",
    "JobScaler.run": "f6c6b5f871b94c72",
    "JobScaler.kill_worker": "863effbe007ad0f9",
    "JobScaler.is_alive": "261d783f83839b12",
    "JobScaler.current_occupancy": "b2aea650fe668006",
    "JobScaler.get_jobs": "e08b2e0cfb262643",
    "JobScaler.run_jobs": "74cd623de98ef8b4",
    "JobScaler.handle_job": "fe2350bfac7373f7",
    "run_worker": "ce0b9b3f79f9f9d3",
}


def _sdk_hashes() -> dict[str, str]:
    from runpod.serverless import worker as sdk_worker
    from runpod.serverless.modules.rp_scale import JobScaler

    hashes = {}
    for name in SDK_SOURCES:
        owner, _, attr = name.rpartition(".")
        obj = getattr(JobScaler, attr) if owner else getattr(sdk_worker, attr)
        hashes[name] = hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]
    return hashes


def test_sdk_code_under_the_event_driven_scaler_is_unchanged():
    import runpod

    assert runpod.__version__ == SDK_VERSION, (
        f"runpod is {runpod.__version__}, worker/queue/intake.py was checked against {SDK_VERSION}"
    )
    changed = sorted(name for name, digest in _sdk_hashes().items() if SDK_SOURCES[name] != digest)
    assert not changed, (
        f"the RunPod SDK changed {changed} (runpod/serverless/modules/rp_scale.py, "
        "runpod/serverless/worker.py). worker/queue/intake.py copies JobScaler.get_jobs (its "
        "1 s sleep made an event wait), replaces run and run_jobs, and relies on run_worker "
        "building rp_scale.JobScaler(config). Re-read those, port the change into "
        "worker/queue/intake.py, run tests/worker/queue/test_intake.py, then update SDK_SOURCES here "
        "with the new digests (printed by _sdk_hashes())."
    )
