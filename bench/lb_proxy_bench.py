"""What the load-balancing proxy adds: the worker's PORT against vLLM itself, side by side.

One real vLLM (CPU build, the tiny test model) is started by the worker in
load-balancing mode (``WORKER_MODE=lb``); the benchmark then sends the same requests to
vLLM directly (127.0.0.1:VLLM_PORT) and through the worker (PORT), alternating one and
the other so machine load hits both alike:

  (a) a 1-token completion (``POST /v1/completions``, ``max_tokens: 1``, not streamed):
      time to the whole answer;
  (b) a streamed completion (``stream: true``, ``max_tokens: 1``): time to the first
      chunk of the body.

Each client keeps one keep-alive connection (as callers of an endpoint do). Reported:
p50 and p90 of each, and the added time: the difference of the p50s and the p50 of
the paired differences (request i through the proxy minus request i direct).

Targets (issue 15): (a) adds <= 1 ms at p50; (b) the first chunk is forwarded within
2 ms. Not a test (starts vLLM): run by hand, under the shared vLLM lock,

    flock /tmp/vllm.lock .venv/bin/python bench/lb_proxy_bench.py [--requests 400] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.common import parse_args, stop_group, write_json  # noqa: E402
from tests.support.vllm_env import free_port, start_worker, tiny_model_env  # noqa: E402

SERVED = "tiny"
BODY = {"model": SERVED, "prompt": "Hello", "max_tokens": 1, "temperature": 0}


def _whole(client: httpx.Client) -> float:
    start = time.perf_counter()
    answer = client.post("/v1/completions", json=BODY)
    elapsed = time.perf_counter() - start
    assert answer.status_code == 200, answer.text
    return elapsed * 1000


def _first_chunk(client: httpx.Client) -> float:
    start = time.perf_counter()
    with client.stream("POST", "/v1/completions", json={**BODY, "stream": True}) as answer:
        assert answer.status_code == 200
        chunks = answer.iter_raw()
        next(chunks)
        elapsed = time.perf_counter() - start
        for _rest in chunks:
            pass
    return elapsed * 1000


def _wait_ready(port: int, deadline_s: float = 600) -> None:
    deadline = time.monotonic() + deadline_s
    with httpx.Client(trust_env=False, timeout=5) as probe:
        while time.monotonic() < deadline:
            try:
                if probe.get(f"http://127.0.0.1:{port}/ping").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    raise SystemExit("the worker did not become ready")


def _summary(direct: list[float], proxied: list[float]) -> dict:
    def pct(values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100)[q - 1]

    paired = [p - d for p, d in zip(proxied, direct, strict=True)]
    return {
        "direct_p50_ms": round(statistics.median(direct), 3),
        "direct_p90_ms": round(pct(direct, 90), 3),
        "proxy_p50_ms": round(statistics.median(proxied), 3),
        "proxy_p90_ms": round(pct(proxied, 90), 3),
        "added_p50_ms": round(statistics.median(proxied) - statistics.median(direct), 3),
        "added_paired_p50_ms": round(statistics.median(paired), 3),
        "added_paired_p90_ms": round(pct(paired, 90), 3),
        "requests": len(direct),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    args = parse_args(parser)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        env = tiny_model_env(
            tmp,
            OPENAI_SERVED_MODEL_NAME_OVERRIDE=SERVED,
            WORKER_MODE="lb",
            PORT=str(port),
        )
        proc = start_worker(env, tmp)
        try:
            _wait_ready(port)
            timeout = httpx.Timeout(60)
            direct = httpx.Client(
                base_url=f"http://127.0.0.1:{env['VLLM_PORT']}", trust_env=False, timeout=timeout
            )
            proxied = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=timeout
            )
            results = {}
            for name, measure in (("completion_1_token", _whole), ("first_chunk", _first_chunk)):
                for _ in range(args.warmup):
                    measure(direct), measure(proxied)
                times: dict[str, list[float]] = {"direct": [], "proxy": []}
                for i in range(args.requests):
                    # Alternate which goes first so neither always follows the other.
                    order = (("direct", direct), ("proxy", proxied))
                    for label, client in order if i % 2 == 0 else order[::-1]:
                        times[label].append(measure(client))
                results[name] = _summary(times["direct"], times["proxy"])
                print(name, json.dumps(results[name]), flush=True)
            direct.close()
            proxied.close()
        finally:
            stop_group(proc)
    results["load_average"] = os.getloadavg()
    write_json(args.json, results)


if __name__ == "__main__":
    main()
