"""How fast the worker reacts to vLLM: ready, failed, and the first job after ready.

With real vLLM (CPU build) on the tiny test model, each round measures:

  (a) ready: from the moment the supervisor receives vLLM's "Application startup
      complete" line to ``supervisor.settled`` (state ready). The Supervisor runs in
      this process; its passthrough is a writer that timestamps every line as it
      arrives, and a state observer timestamps the settle. The supervisor's own
      ``vllm.cold_start`` field ``ready_after_startup_line_ms`` is reported next to it.
  (b) failed: a failing configuration (MAX_MODEL_LEN=8192, above the tiny model's
      limit) makes vLLM exit; from the exit (seen through a pidfd, independently of
      the supervisor's reaping) and from its last output line to ``settled`` (state
      failed-permanent).
  (c) first job: the real worker process (``python -m worker``) on a local QueueServer
      with a job queued before it starts; from its ``worker.state_changed dest=ready``
      log timestamp (JSON on stderr) to the queue server's ``taken_wall`` for that job.
      ``--trace`` also runs the worker with timing marks around the RunPod SDK's start
      steps (written to stderr as ``bench.mark`` lines) to show where that time goes.

Targets: each under 100 ms. Not a test (starts vLLM several times): run by hand,

    .venv/bin/python bench/ready_latency.py [--rounds 3] [--trace] [--json FILE]

Before each vLLM start it waits until no other ``vllm.entrypoints`` process runs
(other sessions share this machine), at most ``--wait-idle`` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from bench.common import parse_args, stop_group, write_json  # noqa: E402
from diagnostics import load_pack  # noqa: E402
from tests.support.queue_server import QueueServer  # noqa: E402
from tests.support.vllm_env import VLLM_PYTHON, build_tiny_model, events, worker_env  # noqa: E402
from worker.config.settings import load_settings  # noqa: E402
from worker.supervision.machine import SETTLED  # noqa: E402
from worker.supervision.supervisor import Supervisor  # noqa: E402

TARGET_MS = 100.0
STARTUP_LINE = b"Application startup complete"


# -- waiting for a quiet machine -----------------------------------------------------


def other_vllms() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "vllm.entrypoints"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def wait_idle(limit_s: float) -> float:
    """Wait until no vLLM server runs; return the seconds waited."""
    start = time.monotonic()
    while other_vllms() and time.monotonic() - start < limit_s:
        time.sleep(2)
    waited = time.monotonic() - start
    if other_vllms():
        print(f"  (still another vLLM running after {waited:.0f} s; going ahead)")
    return waited


# -- (a) and (b): the Supervisor in this process -------------------------------------


class StampingWriter:
    """The supervisor's passthrough: keeps (monotonic time, line) for every line."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, bytes]] = []

    def write(self, data: bytes) -> int:
        self.lines.append((time.monotonic(), bytes(data)))
        return len(data)

    def flush(self) -> None:
        pass

    def first(self, needle: bytes) -> float | None:
        return next((t for t, line in self.lines if needle in line), None)


class ExitWatch:
    """Timestamps the vLLM process's exit through a pidfd (before anyone reaps it)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.exited_at: float | None = None
        self._supervisor = supervisor
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._supervisor.process.pid is None:  # set by the supervisor once spawned
            if self._supervisor.settled.is_set():
                return
            time.sleep(0.001)
        try:
            fd = os.pidfd_open(self._supervisor.process.pid)
        except ProcessLookupError:
            return
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll()
            self.exited_at = time.monotonic()
        finally:
            os.close(fd)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def run_supervisor(env: dict[str, str], timeout: float = 600) -> dict:
    writer = StampingWriter()
    settled_at: list[float] = []
    pack = load_pack()
    with structlog.testing.capture_logs() as logged:
        supervisor = Supervisor(
            load_settings(env),
            pack,
            env,
            passthrough=writer,
        )
        supervisor.effects.observers.append(
            lambda state: settled_at.append(time.monotonic()) if state in SETTLED else None
        )
        started = time.monotonic()
        supervisor.run_in_thread()
        watch = ExitWatch(supervisor)
        if not supervisor.settled.wait(timeout):
            raise TimeoutError(f"supervisor did not settle within {timeout} s")
        state = supervisor.state.value
        supervisor.request_stop()
        supervisor.wait_stopped(60)
        watch.join(5)
    cold = next((e for e in logged if e.get("event") == "vllm.cold_start"), {})
    return {
        "state": state,
        "rule": supervisor.diagnosis.rule if supervisor.diagnosis else None,
        "start_to_settled_s": round(settled_at[0] - started, 2),
        "settled_at": settled_at[0],
        "startup_line_at": writer.first(STARTUP_LINE),
        "last_line_at": writer.lines[-1][0] if writer.lines else None,
        "last_line": writer.lines[-1][1].decode("utf-8", "replace").strip()[:160]
        if writer.lines
        else None,
        "lines": len(writer.lines),
        "exited_at": watch.exited_at,
        "ready_after_startup_line_ms": cold.get("ready_after_startup_line_ms"),
    }


def measure_ready(tmp: Path, model: Path) -> dict:
    env = worker_env(tmp, MODEL_NAME=str(model))
    got = run_supervisor(env)
    assert got["state"] == "ready", got
    got["ready_ms"] = round((got["settled_at"] - got["startup_line_at"]) * 1000, 1)
    return got


def measure_failed(tmp: Path, model: Path) -> dict:
    env = worker_env(tmp, MODEL_NAME=str(model), MAX_MODEL_LEN="8192")
    got = run_supervisor(env)
    assert got["state"].startswith("failed"), got
    got["failed_after_last_line_ms"] = round((got["settled_at"] - got["last_line_at"]) * 1000, 1)
    if got["exited_at"] is not None:
        got["failed_after_exit_ms"] = round((got["settled_at"] - got["exited_at"]) * 1000, 1)
        got["exit_after_last_line_ms"] = round((got["exited_at"] - got["last_line_at"]) * 1000, 1)
    return got


# -- (c): the worker process on a local queue ----------------------------------------

# Runs the worker with timing marks around the SDK's start-up steps (--trace).
_TRACED_WORKER = r"""
import functools, json, os, sys, time

os.environ.setdefault("RUNPOD_DEBUG_LEVEL", "INFO")  # as worker.main sets it, before the SDK loads

def mark(name, **fields):
    sys.stderr.write(json.dumps({"event": "bench.mark", "name": name, "wall": time.time(), **fields}) + "\n")
    sys.stderr.flush()

def traced(owner, attr, label, is_async=False):
    inner = getattr(owner, attr)
    if is_async:
        @functools.wraps(inner)
        async def wrapper(*args, **kwargs):
            mark(label + ".enter")
            try:
                return await inner(*args, **kwargs)
            finally:
                mark(label + ".exit")
    else:
        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            mark(label + ".enter")
            try:
                return inner(*args, **kwargs)
            finally:
                mark(label + ".exit")
    setattr(owner, attr, wrapper)

import runpod.serverless as serverless
from runpod.serverless import worker as sdk_worker
from runpod.serverless.modules import rp_fitness, rp_job, rp_ping, rp_scale
traced(serverless, "start", "sdk.start")
traced(sdk_worker, "run_worker", "sdk.run_worker")
traced(sdk_worker, "run_fitness_checks", "sdk.run_fitness_checks", is_async=True)
traced(rp_ping.Heartbeat, "start_ping", "sdk.heartbeat.start_ping")
traced(rp_scale.JobScaler, "start", "sdk.JobScaler.start")
traced(rp_scale.JobScaler, "run", "sdk.JobScaler.run", is_async=True)
traced(rp_scale, "AsyncClientSession", "sdk.AsyncClientSession")
traced(rp_ping.Heartbeat, "process_loop", "sdk.ping_process")  # in the forked child
traced(rp_scale.JobScaler, "set_scale", "sdk.JobScaler.set_scale", is_async=True)
traced(rp_scale, "get_job", "sdk.get_job", is_async=True)  # JobScaler binds it at init

from worker import main
traced(main, "make_handler", "worker.main.make_handler")  # the main thread woke up

sys.exit(main.main())
"""


def measure_first_job(tmp: Path, model: Path, trace: bool) -> dict:
    with QueueServer() as queue:
        job = queue.submit({"openai_route": "/v1/models"})
        env = worker_env(tmp, MODEL_NAME=str(model), **queue.env())
        argv = [sys.executable, "-c", _TRACED_WORKER] if trace else [sys.executable, "-m", "worker"]
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=(tmp / "worker.out").open("wb"),
            stderr=(tmp / "worker.err").open("wb"),
        )
        try:
            done = queue.wait_done(job, timeout=600)
        finally:
            stop_group(proc)
        record = queue.job(job)
        takes = [h for h in queue.hits() if h.kind.startswith("job-take")]
    logged = events(tmp)
    ready = next(
        e for e in logged if e.get("event") == "worker.state_changed" and e.get("dest") == "ready"
    )
    ready_wall = datetime.fromisoformat(ready["timestamp"]).timestamp()
    got = {
        "job_ok": "output" in done,
        "first_take_kind": takes[0].kind if takes else None,
        "first_job_ms": round((record.taken_wall - ready_wall) * 1000, 1),
    }
    marks = [e for e in logged if e.get("event") == "bench.mark"]
    if marks:
        got["marks_ms_after_ready"] = [
            (m["name"], round((m["wall"] - ready_wall) * 1000, 1)) for m in marks
        ]
    return got


# -- main ----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("ready", "failed", "first-job"), action="append")
    parser.add_argument("--trace", action="store_true", help="timing marks in the SDK start")
    parser.add_argument("--wait-idle", type=float, default=900.0)
    args = parse_args(parser)
    if not VLLM_PYTHON.exists():
        print(f"vLLM CPU build not found at {VLLM_PYTHON}", file=sys.stderr)
        return 2
    which = args.only or ["ready", "failed", "first-job"]

    results: dict[str, list[dict]] = {name: [] for name in which}
    with tempfile.TemporaryDirectory(prefix="ready-latency-") as root:
        root = Path(root)
        model = build_tiny_model(root / "model")
        for round_no in range(1, args.rounds + 1):
            for name in which:
                tmp = root / f"{name}-{round_no}"
                tmp.mkdir()
                waited = wait_idle(args.wait_idle)
                print(f"round {round_no} {name} (waited {waited:.0f} s for a quiet machine)")
                if name == "ready":
                    got = measure_ready(tmp, model)
                elif name == "failed":
                    got = measure_failed(tmp, model)
                else:
                    got = measure_first_job(tmp, model, args.trace)
                got["loadavg"] = os.getloadavg()[0]
                got["waited_s"] = round(waited)
                print("  " + json.dumps({k: v for k, v in got.items() if not k.endswith("_at")}))
                results[name].append(got)

    print("\nsummary (ms; target < 100 each)")
    keys = {
        "ready": ["ready_ms", "ready_after_startup_line_ms"],
        "failed": ["failed_after_exit_ms", "failed_after_last_line_ms", "exit_after_last_line_ms"],
        "first-job": ["first_job_ms"],
    }
    summary = {}
    for name in which:
        for key in keys[name]:
            values = [r[key] for r in results[name] if r.get(key) is not None]
            if not values:
                continue
            summary[key] = values
            print(
                f"  {key:30s} median {statistics.median(values):8.1f}  "
                f"min {min(values):8.1f}  max {max(values):8.1f}  runs {values}"
            )
    traced = [
        r["marks_ms_after_ready"]
        for r in results.get("first-job", [])
        if "marks_ms_after_ready" in r
    ]
    if traced:
        print(
            "\n  SDK start-up marks, ms after the ready log line (median over rounds; first of each):"
        )
        firsts: dict[str, list[float]] = {}
        for marks in traced:
            seen: set[str] = set()
            for name, ms in marks:
                if name not in seen:
                    seen.add(name)
                    firsts.setdefault(name, []).append(ms)
        for name, values in sorted(firsts.items(), key=lambda item: statistics.median(item[1])):
            print(f"    {statistics.median(values):8.1f}  {name}  {values}")
    with contextlib.suppress(OSError):
        write_json(
            args.json,
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "cpus": os.cpu_count(),
                "results": results,
                "summary": summary,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
