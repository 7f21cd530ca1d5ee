"""Record what the pre-flight sees on a GPU machine: the NVML inventory and the RunPod
SDK's own start-up fitness checks (the gpu_test allocation binary included), as JSON.

Needs only python, ``nvidia-ml-py`` and ``runpod`` (no vLLM, no worker dependencies):
it loads worker/seams/gpus.py and worker/preflight/host.py by path. Run it from a checkout:

    python scripts/gpu_inventory.py OUT.json [--network]

``--network`` also runs the SDK's network check (a TCP connection to 8.8.8.8:53); it is
left out by default, as machines that reach nothing outside fail it after 5 s. The
output goes to fixtures/gpu/ as a record of a real GPU (see docs/preflight.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_module(name: str, path: Path):
    """A module of the checkout loaded by its path alone (not its package, whose
    ``__init__`` imports the worker's dependencies); scripts/gpu_faults.py uses it too."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _gpu_test() -> dict:
    """The SDK's gpu_test binary, run directly, and the SDK's parse of its output."""
    from runpod._binary_helpers import get_binary_path
    from runpod.serverless.modules import rp_gpu_fitness

    binary = get_binary_path("gpu_test")
    if binary is None:
        return {"binary": None}
    began = time.monotonic()
    done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    return {
        "binary": str(binary),
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - began, 3),
        "stdout": done.stdout,
        "stderr": done.stderr,
        "parsed": rp_gpu_fitness._parse_gpu_test_output(done.stdout),
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("output", type=Path)
    cli.add_argument("--network", action="store_true", help="run the SDK's network check too")
    args = cli.parse_args(argv)
    gpus = load_module("worker_gpus", ROOT / "worker" / "seams" / "gpus.py")
    host = load_module("worker_preflight_host", ROOT / "worker" / "preflight" / "host.py")
    record: dict = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "env": {
            k: v for k, v in os.environ.items() if k.startswith(("RUNPOD_MIN", "CUDA_VISIBLE"))
        },
    }
    began = time.monotonic()
    record["inventory"] = gpus.read_inventory().to_dict()
    record["inventory_seconds"] = round(time.monotonic() - began, 3)
    with contextlib.redirect_stdout(sys.stderr):  # the SDK logs to stdout
        checks = host.take_sdk_checks()
        if not args.network:  # the SDK has no switch for this one check alone
            checks = [c for c in checks if "network" not in c.__name__]
        began = time.monotonic()
        report = host.run_checks(checks, 60.0)
        record["sdk_checks"] = {
            "registered": [c.__name__ for c in checks],
            "passed": report.passed,
            "timed_out": report.timed_out,
            "failure": report.failure.__dict__ if report.failure else None,
            "seconds": round(time.monotonic() - began, 3),
        }
        try:
            record["gpu_test"] = _gpu_test()
        except Exception as exc:  # record what happened; never lose the rest
            record["gpu_test"] = {"error": f"{type(exc).__name__}: {exc}"}
        from runpod.serverless.modules import rp_fitness

        record["sdk_registry_left"] = len(rp_fitness._fitness_checks)
        asyncio.run(rp_fitness.run_fitness_checks())  # the SDK's own start: nothing to run
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
