"""Per-job overhead of the worker's job intake: direct vLLM vs through the worker.

Real parts only: vLLM's CPU build on the tiny test model, the real worker process
(``python -m worker``, which starts that vLLM itself) and the real RunPod SDK job loop
against the loopback queue (``tests/support/queue_server.py``). The worker runs twice
in one run, one after the other: with the event-driven scaler (``worker/queue/intake.py``,
what ``python -m worker`` runs) and with the SDK's own polling ``JobScaler``.

While each worker serves, rounds alternate between

* direct: 1-token completions straight to the worker's vLLM port (a lean asyncio
  client on kept-alive connections, timed in the client);
* via the queue: the same request as a job (``openai_route`` /v1/completions), timed
  from the queue's ``submit`` to the worker's job-done POST arriving at the queue;

at concurrency 1 and 30 (closed loop: each client thread sends its next request when
the last one is answered). Added = via-queue percentile - direct percentile.

Streaming: time to the first chunk, direct (first SSE ``data:`` line from vLLM) vs via
the queue (the first job-stream POST arriving at the queue), 16-token completions.

The queue's own cost: the same SDK loop (each scaler) with a handler that does no work
(it yields one item, as the worker's handler does for a whole answer), so the figure
shows what the loopback queue and the SDK's HTTP calls cost on their own.

``--pin`` runs vLLM (and its engine) on CPU 0 and the worker, the queue and the clients
on CPU 1: on this 2-CPU machine vLLM's CPU build otherwise keeps both CPUs busy while
requests are in flight, and the worker waits for a CPU (on a GPU host vLLM's model runs
on the GPU and the host has cores to spare). Both arms are pinned alike.

Not a test: run it under the vLLM lock, on a machine as quiet as you can get,

    flock /tmp/vllm.lock .venv/bin/python bench/job_overhead.py [--pin] [--scalers event] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import parse_args, pct, stop_group, write_json  # noqa: E402
from tests.support.queue_server import QueueServer  # noqa: E402
from tests.support.vllm_env import VLLM_COMMAND, build_tiny_model, worker_env  # noqa: E402

SERVED = "tiny"
BODY = {"model": SERVED, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
STREAM_BODY = {**BODY, "max_tokens": 16, "stream": True}

# The worker with the SDK's own scaler: the same worker, one name changed.
OLD_WORKER = (
    "from runpod.serverless.modules import rp_scale\n"
    "from worker import intake\n"
    "intake.SCALER = rp_scale.JobScaler\n"
    "from worker.main import exit_now, main\n"
    "exit_now(main())\n"
)
# A job loop with no work: the queue's and the SDK's own cost.
NOOP_WORKER = (
    "import sys\n"
    "from runpod.serverless.modules import rp_scale\n"
    "from worker import intake\n"
    "if sys.argv[1] == 'sdk':\n"
    "    intake.SCALER = rp_scale.JobScaler\n"
    "async def handler(job):\n"
    "    yield {'ok': True}\n"
    "intake.start({'handler': handler, 'return_aggregate_stream': True,\n"
    "              'concurrency_modifier': lambda current: 30})\n"
    "from worker.main import exit_now\n"
    "exit_now(0)\n"
)
SCALERS = {"event": ["-m", "worker"], "sdk": ["-c", OLD_WORKER]}


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(pct(values, 50), 2),
        "p99": round(pct(values, 99), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def closed_loop(concurrency: int, total: int, one: Callable[[], float]) -> list[float]:
    """``total`` calls of ``one`` (returns ms) from ``concurrency`` threads.

    At concurrency > 1 each thread's first and last calls are left out: they overlap
    the start burst and the drain, when fewer than ``concurrency`` are in flight.
    """
    results: list[float] = []
    lock = threading.Lock()
    per_thread = max(1, total // concurrency)

    def client() -> None:
        mine = [one() for _ in range(per_thread)]
        with lock:
            results.extend(mine[1:-1] if concurrency > 1 else mine)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


class Direct:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/v1/completions"
        self._local = threading.local()

    def _client(self) -> httpx.Client:
        if not hasattr(self._local, "client"):
            self._local.client = httpx.Client(timeout=300)
        return self._local.client

    def run(self, concurrency: int, total: int) -> list[float]:
        """Closed loop from one thread: ``concurrency`` kept-alive connections (asyncio,
        a pre-built request), so the client's own CPU stays far below vLLM's and
        ``concurrency`` requests really are in flight. Trimmed as ``closed_loop``."""
        host, port = "127.0.0.1", int(self.url.split(":")[2].split("/")[0])
        body = json.dumps(BODY).encode()
        request = (
            f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        per_client = max(1, total // concurrency)

        async def client() -> list[float]:
            reader, writer = await asyncio.open_connection(host, port)
            mine = []
            try:
                for _ in range(per_client):
                    start = time.perf_counter()
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    )
                    await reader.readexactly(length)
                    mine.append((time.perf_counter() - start) * 1000)
                    if not head.startswith(b"HTTP/1.1 200"):
                        raise RuntimeError(f"vLLM answered {head[:40]!r}")
            finally:
                writer.close()
            return mine[1:-1] if concurrency > 1 else mine

        async def all_clients() -> list[float]:
            results = await asyncio.gather(*(client() for _ in range(concurrency)))
            return [ms for mine in results for ms in mine]

        return asyncio.run(all_clients())

    def once(self) -> float:
        start = time.perf_counter()
        response = self._client().post(self.url, json=BODY)
        elapsed = (time.perf_counter() - start) * 1000
        response.raise_for_status()
        return elapsed

    def first_chunk(self) -> float:
        start = time.perf_counter()
        first = None
        with self._client().stream("POST", self.url, json=STREAM_BODY) as response:
            for line in response.iter_lines():
                if first is None and line.startswith("data:"):
                    first = (time.perf_counter() - start) * 1000
        assert first is not None
        return first


class ViaQueue:
    """Closed-loop jobs from one client thread: a new job as soon as one is answered.

    One waiting thread, not one per job: the queue wakes every waiter on every request
    it serves, and 30 waiting threads would slow the queue they measure.
    """

    def __init__(self, queue: QueueServer, job_input: dict):
        self.queue = queue
        self.job_input = job_input

    def run(self, concurrency: int, total: int, first_chunk: bool = False) -> list[float]:
        queue = self.queue
        outstanding = {queue.submit(self.job_input) for _ in range(min(concurrency, total))}
        submitted, results = len(outstanding), []  # (ms, submitted at)
        while outstanding:
            finished = queue.wait_for(
                lambda: [j for j in outstanding if queue.done_at(j) is not None], 300, "a job"
            )
            for job in finished:
                outstanding.discard(job)
                record = queue.job(job)
                if not isinstance(record.done, dict) or "error" in record.done:
                    raise RuntimeError(f"job failed: {str(record.done)[:500]}")
                end = record.stream_at[0] if first_chunk else record.done_at
                assert end is not None
                results.append(((end - record.submitted_at) * 1000, record.submitted_at))
                if submitted < total:
                    outstanding.add(queue.submit(self.job_input))
                    submitted += 1
        if concurrency > 1:  # leave out the start burst and the drain, as closed_loop does
            results.sort(key=lambda sample: sample[1])
            results = results[concurrency:-concurrency]
        return [ms for ms, _ in results]


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (all their threads)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (vLLM runs in its own session)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                pids.append(int(stat.parent.name))
    return pids


def vllm_pid(log_dir_err: Path) -> int:
    for line in log_dir_err.read_text(errors="replace").splitlines():
        if '"vllm.spawned"' in line:
            return json.loads(line)["pid"]
    raise RuntimeError("no vllm.spawned event in the worker's log")


class CpuMeter:
    """CPU ms per job of the worker, vLLM and this process, over one arm."""

    def __init__(self, worker: int, vllm: int):
        self.worker, self.vllm = worker, vllm

    def _now(self) -> tuple[float, float, float]:
        me = os.times()
        return cpu_s([self.worker]), cpu_s(session_pids(self.vllm)), me.user + me.system

    def measure(
        self, arm: Callable[[], list[float]], jobs: int, into: dict, key: str
    ) -> list[float]:
        before, started = self._now(), time.perf_counter()
        samples = arm()
        after, wall = self._now(), time.perf_counter() - started
        n = into.setdefault(key, {"jobs": 0, "worker": 0.0, "vllm": 0.0, "bench": 0.0, "wall": 0.0})
        n["jobs"] += jobs
        n["wall"] += wall * 1000
        for name, b, a in zip(("worker", "vllm", "bench"), before, after, strict=True):
            n[name] += (a - b) * 1000
        return samples


def job_input(body: dict) -> dict:
    return {"openai_route": "/v1/completions", "openai_input": body}


# --pin: vLLM's CPU and the one left for the worker, the queue and the clients.
VLLM_CPU, WORKER_CPU = 0, 1


def pin_env(pin: bool) -> dict[str, str]:
    """vLLM on VLLM_CPU: its command under taskset, its OpenMP threads bound there too
    (the CPU build binds them itself otherwise, over taskset)."""
    if not pin:
        return {}
    return {
        "VLLM_COMMAND": f"taskset -c {VLLM_CPU} {VLLM_COMMAND}",
        "VLLM_CPU_OMP_THREADS_BIND": str(VLLM_CPU),
    }


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=log.with_suffix(".out").open("wb"),
        stderr=log.with_suffix(".err").open("wb"),
    )
    try:
        yield proc
    finally:
        stop_group(proc, 90)


def measure_worker(scaler: str, model: Path, tmp: Path, args: argparse.Namespace) -> dict:
    """One worker (with ``scaler``) and its vLLM: direct and via-queue rounds."""
    with QueueServer() as queue:
        env = worker_env(
            tmp,
            MODEL_NAME=str(model),
            OPENAI_SERVED_MODEL_NAME_OVERRIDE=SERVED,
            RUNPOD_DEBUG_LEVEL="INFO",
            **queue.env(f"bench-{scaler}"),
            **pin_env(args.pin),
        )
        with running(SCALERS[scaler], env, tmp / f"worker-{scaler}") as proc:
            queue.wait_done(queue.submit({"openai_route": "/v1/models"}), 600)
            meter = CpuMeter(proc.pid, vllm_pid(tmp / f"worker-{scaler}.err"))
            cpu: dict = {}
            direct = Direct(int(env["VLLM_PORT"]))
            via = ViaQueue(queue, job_input(BODY))
            via_stream = ViaQueue(queue, job_input(STREAM_BODY))
            for _ in range(args.warmup):  # first requests compile and fill caches
                direct.once(), direct.first_chunk()
            via.run(1, args.warmup), via_stream.run(1, args.warmup, first_chunk=True)
            out: dict = {}
            for concurrency in (1, 30):
                total = args.jobs if concurrency == 1 else args.jobs * 3
                d: list[float] = []
                v: list[float] = []
                n = total // args.rounds
                for _ in range(args.rounds):
                    d += meter.measure(
                        lambda c=concurrency, n=n: direct.run(c, n),
                        n,
                        cpu,
                        f"c{concurrency}-direct",
                    )
                    v += meter.measure(
                        lambda c=concurrency, n=n: via.run(c, n), n, cpu, f"c{concurrency}-via"
                    )
                out[f"c{concurrency}"] = {"direct": d, "via": v}
            ds: list[float] = []
            vs: list[float] = []
            for _ in range(args.rounds):
                ds += closed_loop(1, args.stream_jobs // args.rounds, direct.first_chunk)
                vs += via_stream.run(1, args.stream_jobs // args.rounds, first_chunk=True)
            out["stream_c1"] = {"direct": ds, "via": vs}
            out["cpu_ms_per_job"] = {
                key: {k: round(v / c["jobs"], 2) for k, v in c.items() if k != "jobs"}
                for key, c in cpu.items()
            }
    return out


def measure_noop(scaler: str, tmp: Path, args: argparse.Namespace) -> dict:
    with QueueServer() as queue:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
        env.update(queue.env(f"noop-{scaler}"), RUNPOD_DEBUG_LEVEL="INFO")
        with running(["-c", NOOP_WORKER, scaler], env, tmp / f"noop-{scaler}"):
            via = ViaQueue(queue, {"noop": True})
            via.run(1, args.warmup)
            return {f"c{c}": via.run(c, args.jobs if c == 1 else args.jobs * 3) for c in (1, 30)}


def report(results: dict) -> str:
    lines = [
        "| scaler | concurrency | direct vLLM p50 / p99 | via the worker p50 / p99 "
        "| added p50 / p99 | queue alone (no work) p50 / p99 |",
        "|---|---|---|---|---|---|",
    ]
    for scaler in results["workers"]:
        worker = results["workers"][scaler]
        for c in ("c1", "c30"):
            d, v = summary(worker[c]["direct"]), summary(worker[c]["via"])
            n = summary(results["noop"][scaler][c])
            lines.append(
                f"| {scaler} | {c[1:]} | {d['p50']} / {d['p99']} | {v['p50']} / {v['p99']} "
                f"| **{v['p50'] - d['p50']:+.1f} / {v['p99'] - d['p99']:+.1f}** "
                f"| {n['p50']} / {n['p99']} |"
            )
    lines += [
        "",
        "| scaler | first chunk, direct p50 / p99 | via the queue p50 / p99 | behind p50 / p99 |",
        "|---|---|---|---|",
    ]
    for scaler in results["workers"]:
        s = results["workers"][scaler]["stream_c1"]
        d, v = summary(s["direct"]), summary(s["via"])
        lines.append(
            f"| {scaler} | {d['p50']} / {d['p99']} | {v['p50']} / {v['p99']} "
            f"| **{v['p50'] - d['p50']:+.1f} / {v['p99'] - d['p99']:+.1f}** |"
        )
    lines += [
        "",
        "| scaler | arm | jobs/s | CPU ms per job: worker / vLLM / benchmark (queue, clients) |",
        "|---|---|---|---|",
    ]
    for scaler in results["workers"]:
        for key, c in results["workers"][scaler]["cpu_ms_per_job"].items():
            rate = round(1000 / c["wall"])
            lines.append(
                f"| {scaler} | {key} | {rate} | {c['worker']} / {c['vllm']} / {c['bench']} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="requests per arm at c=1")
    parser.add_argument("--stream-jobs", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3, help="direct/via alternations")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--noop-only", action="store_true", help="skip vLLM: the queue alone")
    parser.add_argument(
        "--pin", action="store_true", help="vLLM on CPU 0; worker, queue, clients on CPU 1"
    )
    parser.add_argument("--scalers", nargs="+", choices=["event", "sdk"], default=["event", "sdk"])
    args = parse_args(parser)
    if args.pin:  # this process (queue, clients) and so the worker it starts: WORKER_CPU
        os.sched_setaffinity(0, {WORKER_CPU})
    tmp = Path(tempfile.mkdtemp(prefix="job-overhead-"))
    load_before = os.getloadavg()
    model = build_tiny_model(tmp / "model")
    results: dict = {"noop": {}, "workers": {}}
    results["pinned"] = args.pin
    for scaler in args.scalers:
        results["noop"][scaler] = measure_noop(scaler, tmp, args)
    if args.noop_only:
        print({s: {c: summary(v) for c, v in r.items()} for s, r in results["noop"].items()})
        return 0
    for scaler in args.scalers:
        results["workers"][scaler] = measure_worker(scaler, model, tmp, args)
    results["loadavg"] = {"before": load_before, "after": os.getloadavg()}
    table = report(results)
    print(table)
    print(f"load average before {load_before}, after {os.getloadavg()}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
