"""Soak: 30 concurrent streaming jobs for N minutes through the real SDK job loop on
the tiny model (vLLM CPU build). Records completed jobs, errors, and the worker's RSS
at the start and the end of the run.

Usage: .venv/bin/python bench/soak.py [--minutes 10] [--concurrency 30]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.queue_server import QueueServer  # noqa: E402
from tests.support.vllm_env import build_tiny_model, start_worker, worker_env  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stream_problem(result: dict) -> str | None:
    """None when a streamed job ended cleanly; else a short description of what it got.

    Items are SSE text cut at event boundaries (one item may hold several events);
    an error answer is a non-string item or an ``error`` in the job-done body.
    """
    if result.get("error"):
        return f"job error: {str(result['error'])[:300]}"
    output = result.get("output")
    if not isinstance(output, list) or not output:
        return f"no stream output: {str(output)[:300]}"
    for item in output:
        if not isinstance(item, str):
            return f"error item: {str(item)[:300]}"
    text = "".join(output)
    if not text.rstrip().endswith("data: [DONE]"):
        return f"stream did not end with [DONE]: ...{text[-200:]!r}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    model = build_tiny_model(tmp / "model")
    job = {
        "openai_route": "/v1/chat/completions",
        "openai_input": {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 16,
            "stream": True,
        },
    }
    with QueueServer() as queue:
        env = worker_env(tmp, MODEL_NAME=str(model), **queue.env())
        proc = start_worker(env, tmp)
        queue.wait_done(queue.submit({"openai_route": "/v1/models"}), 300)
        start_rss = rss_mb(proc.pid)
        deadline = time.monotonic() + args.minutes * 60
        done = errors = 0
        samples: list[str] = []
        lock = threading.Lock()

        def client() -> None:
            nonlocal done, errors
            while time.monotonic() < deadline:
                result = queue.wait_done(queue.submit(job), 300)
                problem = stream_problem(result)
                with lock:
                    done += problem is None
                    if problem is not None:
                        errors += 1
                        if len(samples) < 10:
                            samples.append(problem)

        threads = [threading.Thread(target=client) for _ in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end_rss = rss_mb(proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    report = {
        "minutes": args.minutes,
        "concurrency": args.concurrency,
        "completed": done,
        "errors": errors,
        "worker_rss_start_mb": round(start_rss, 1),
        "worker_rss_end_mb": round(end_rss, 1),
        "rss_growth_pct": round(100 * (end_rss - start_rss) / start_rss, 1),
        "error_samples": samples,
    }
    print(json.dumps(report, indent=2))
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
