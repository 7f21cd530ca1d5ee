"""The RunPod SDK's own start-up fitness checks, run before vLLM instead of inside
``runpod.serverless.start``.

The SDK (1.12) runs its checks (host RAM, disk, network, and with a GPU: CUDA version,
CUDA initialisation, a matmul benchmark and the ``gpu_test`` allocation binary) when its
job loop starts, and ends the process with ``os._exit(1)`` on a failure: no diagnosis,
no answered job, a crash loop, and the GPU test competing with vLLM's memory profiling.
Here the same registered checks run first, each under a timeout, and a failure is
returned; the SDK's registry is then emptied, so its start finds nothing left to run.
The checks honour the SDK's own knobs (RUNPOD_MIN_MEMORY_GB, RUNPOD_MIN_DISK_PERCENT,
RUNPOD_SKIP_AUTO_SYSTEM_CHECKS, RUNPOD_SKIP_GPU_CHECK, ...).

Imports only the standard library and runpod (scripts/gpu_inventory.py loads it alone).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HostFailure:
    check: str
    error: str
    category: str  # a diagnostics Category value: network, cuda_fault or other


@dataclass(frozen=True)
class HostReport:
    passed: list[str]
    failure: HostFailure | None
    timed_out: list[str]


def _category(name: str) -> str:
    lowered = name.lower()
    if "network" in lowered:
        return "network"
    if any(word in lowered for word in ("gpu", "cuda", "benchmark")):
        return "cuda_fault"
    return "other"


def take_sdk_checks() -> list[Callable]:
    """The checks the SDK would run at start, removed from its registry (so it will not
    run them again). Registers the SDK's automatic checks first, as its start would."""
    from runpod.serverless.modules import rp_fitness

    rp_fitness._ensure_gpu_check_registered()
    rp_fitness._ensure_system_checks_registered()
    checks = list(rp_fitness._fitness_checks)
    rp_fitness.clear_fitness_checks()
    return checks


async def _run_one(check: Callable, timeout: float) -> None:
    if inspect.iscoroutinefunction(check):
        await asyncio.wait_for(check(), timeout)
    else:
        await asyncio.wait_for(asyncio.to_thread(check), timeout)


def run_checks(checks: list[Callable], timeout: float) -> HostReport:
    """Run ``checks`` in order (as the SDK does: the first failure ends the run)."""
    passed: list[str] = []
    timed_out: list[str] = []

    async def main() -> HostFailure | None:
        for check in checks:
            name = getattr(check, "__name__", "check").strip("_")
            try:
                await _run_one(check, timeout)
            except TimeoutError:
                timed_out.append(name)  # no answer is not a definite one: go ahead
                continue
            except Exception as exc:
                message = " ".join(str(exc).split()) or type(exc).__name__
                return HostFailure(name, message, _category(name))
            passed.append(name)
        return None

    failure = asyncio.run(main())
    return HostReport(passed, failure, timed_out)
