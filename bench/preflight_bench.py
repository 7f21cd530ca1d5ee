"""Benchmark the pre-flight against the loopback hub, beside vLLM learning the same thing.

Cases (each a configuration the pre-flight stops, plus one it lets through): a good
model (go), a gated repo, a missing repo, a missing revision, MAX_MODEL_LEN above the
model's positions, an unsupported architecture, custom code without TRUST_REMOTE_CODE,
and 141 GB of weights (described by the hub, never served) on this machine's memory.
The hub is tests/support/hub_server.py on 127.0.0.1, the client the real huggingface_hub.

  warm   ``run_preflight`` in this process, ``--repeat`` times per case
  cold   a fresh ``python`` per run: imports included, as at a worker's start
  worker (``--worker N``) the worker process itself (``python -m worker``, job queue on
         127.0.0.1) on the too-long case: from the process's spawn to its
         ``worker.state_changed`` event into failed-permanent (its log timestamp)
  vllm   (``--yardstick``) the real vLLM CPU build started on the too-long case, timed
         from spawn to its exit: the same failure learned the expensive way (no download
         here; on a GPU, the download and load come on top). Run it under the vLLM lock:
         ``flock /tmp/vllm.lock .venv/bin/python bench/preflight_bench.py --yardstick``

Not a test: run by hand, ``.venv/bin/python bench/preflight_bench.py [--repeat 20]``.
Prints a Markdown table and, with ``--json PATH``, writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from huggingface_hub import constants  # noqa: E402

from bench.common import parse_args, pct, stop_group, write_json  # noqa: E402
from diagnostics import load_pack  # noqa: E402
from tests.support.hub_server import Described, HubServer  # noqa: E402
from tests.support.tiny_model import HUB_CONFIG as CONFIG  # noqa: E402
from worker.preflight import run_preflight  # noqa: E402

REPOS = {
    "org/ok": CONFIG,
    "org/gated": CONFIG,
    "org/arch": {**CONFIG, "architectures": ["FrobForCausalLM"]},
    "org/custom": {**CONFIG, "model_type": "frob_llama", "auto_map": {"AutoConfig": "c.F"}},
    "org/big": {**CONFIG, "torch_dtype": "bfloat16"},
}
BIG = {
    "model-00001-of-00002.safetensors": Described(80 * 10**9, {"BF16": 40 * 10**9}),
    "model-00002-of-00002.safetensors": Described(61 * 10**9, {"BF16": 30_500_000_000}),
}
CASES = {  # name -> (model, extra args, expected rule or None)
    "good model (go)": ("org/ok", ["--max-model-len", "1024"], None),
    "gated": ("org/gated", [], "gated-repo"),
    "missing repo": ("org/nope", [], "repo-not-found"),
    "missing revision": ("org/ok", ["--revision", "v9"], "repo-not-found"),
    "too long": ("org/ok", ["--max-model-len", "8192"], "max-model-len-above-model-limit"),
    "unsupported arch": ("org/arch", [], "architecture-not-supported"),
    "custom code": ("org/custom", [], "remote-code-required"),
    "141 GB weights": ("org/big", [], "host-memory-exhausted"),
}
COLD = """
import sys, time
t = time.perf_counter()
sys.path.insert(0, {root!r})
from types import SimpleNamespace
from diagnostics import load_pack
from worker.preflight import run_preflight
s = SimpleNamespace(model="org/ok", vllm_args=["--model", "org/ok", "--max-model-len", "8192"])
d = run_preflight(s, {{"HF_ENDPOINT": {url!r}}}, pack=load_pack(), sdk_checks=False).diagnosis
assert d is not None and d.rule == "max-model-len-above-model-limit", d
print(time.perf_counter() - t)
"""


def write_repos(root: Path) -> dict[str, Path]:
    dirs = {}
    for repo, config in REPOS.items():
        folder = root / repo.replace("/", "--")
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(config))
        if repo != "org/big":
            (folder / "model.safetensors").write_bytes(bytes(1024))
        dirs[repo] = folder
    return dirs


def warm(hub: HubServer, repeat: int) -> dict[str, list[float]]:
    pack = load_pack()
    env = {"HF_ENDPOINT": hub.url}
    times: dict[str, list[float]] = {}
    for name, (model, args, rule) in CASES.items():
        settings = SimpleNamespace(model=model, vllm_args=["--model", model, *args])
        times[name] = []
        for _ in range(repeat):
            began = time.perf_counter()
            result = run_preflight(settings, env, pack=pack, sdk_checks=False)
            times[name].append(time.perf_counter() - began)
            got = result.diagnosis.rule if result.diagnosis else None
            assert got == rule, (name, got)
    return times


def cold(hub: HubServer, runs: int) -> list[float]:
    code = COLD.format(root=str(ROOT), url=hub.url)
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        out.append(float(done.stdout.strip().splitlines()[-1]))
    return out


def worker_runs(hub: HubServer, runs: int, root: Path) -> list[float]:
    """Seconds from spawning the worker to its failed-permanent state change."""
    from datetime import datetime

    from tests.support.queue_server import QueueServer
    from tests.support.vllm_env import events, start_worker, worker_env

    out = []
    for n in range(runs):
        tmp = root / f"worker-{n}"
        tmp.mkdir()
        with QueueServer() as queue:
            env = worker_env(tmp, MODEL_NAME="org/ok", MAX_MODEL_LEN="8192", **queue.env())
            del env["HF_HUB_OFFLINE"]
            env["HF_ENDPOINT"] = hub.url
            began = time.time()
            proc = start_worker(env, tmp)
            try:
                job = queue.submit({"prompt": "hi"})
                queue.wait_done(job, 60)
            except TimeoutError:
                sys.stderr.write((tmp / "worker.err").read_text(errors="replace")[-3000:])
                raise
            finally:
                stop_group(proc)
        failed = next(
            e
            for e in events(tmp)
            if e.get("event") == "worker.state_changed" and e.get("dest") == "failed-permanent"
        )
        stamp = datetime.fromisoformat(failed["timestamp"].replace("Z", "+00:00")).timestamp()
        out.append(stamp - began)
    return out


def yardstick(root: Path) -> float:
    """Seconds from spawning vLLM (CPU build) on the too-long case to its exit."""
    python = ROOT / ".venv-vllm" / "bin" / "python"
    model = root / "vllm-model"
    subprocess.run(
        [str(python), "-m", "tests.support.tiny_model", str(model)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    env.update(HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    argv = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "8192",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    spent = time.perf_counter() - began
    assert done.returncode != 0 and "User-specified max_model_len" in done.stdout + done.stderr
    return spent


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--repeat", type=int, default=20, help="warm runs per case")
    cli.add_argument("--cold", type=int, default=5, help="fresh-process runs")
    cli.add_argument("--worker", type=int, default=0, help="worker-process runs")
    cli.add_argument("--yardstick", action="store_true", help="also time real vLLM once")
    args = parse_args(cli, argv)
    constants.HF_HUB_OFFLINE = False
    with tempfile.TemporaryDirectory(prefix="preflight-bench-") as tmp:
        root = Path(tmp)
        with HubServer(write_repos(root), gated={"org/gated"}, described={"org/big": BIG}) as hub:
            warm_times = warm(hub, args.repeat)
            cold_times = cold(hub, args.cold)
            worker_times = worker_runs(hub, args.worker, root)
            assert hub.weight_bytes_served == 0
        vllm_s = yardstick(root) if args.yardstick else None
    every = [t for ts in warm_times.values() for t in ts]
    print(f"{platform.node()} {platform.python_version()} load {os.getloadavg()[0]:.1f}")
    print("| case | p50 ms | p95 ms |\n|---|---:|---:|")
    for name, ts in warm_times.items():
        print(f"| {name} | {statistics.median(ts) * 1000:.1f} | {pct(ts, 95) * 1000:.1f} |")
    print(
        f"| all cases, warm | {statistics.median(every) * 1000:.1f} | {pct(every, 95) * 1000:.1f} |"
    )
    print(
        f"| too long, cold process (imports included) | {statistics.median(cold_times) * 1000:.1f}"
        f" | {max(cold_times) * 1000:.1f} (max) |"
    )
    if worker_times:
        print(
            f"| too long, worker process spawn to failed-permanent ({len(worker_times)} runs) | "
            f"{statistics.median(worker_times) * 1000:.0f} | {max(worker_times) * 1000:.0f} (max) |"
        )
    if vllm_s is not None:
        print(f"| too long, real vLLM spawn to exit (yardstick) | {vllm_s * 1000:.0f} | (1 run) |")
    write_json(
        args.json,
        {"warm": warm_times, "cold": cold_times, "worker": worker_times, "vllm_s": vllm_s},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
