"""The RunPod SDK's own start-up fitness checks, run before vLLM instead of inside
``runpod.serverless.start``.

The SDK (1.12) runs its checks (host RAM, disk, network, and with a GPU: CUDA version,
CUDA initialisation, a matmul benchmark and the ``gpu_test`` allocation binary) when its
job loop starts, and ends the process with ``os._exit(1)`` on a failure: no diagnosis,
no answered job, a crash loop, and the GPU test competing with vLLM's memory profiling.
Here the same registered checks run first, each under a timeout, and a failure is
returned; the SDK's registry is then emptied, so its start finds nothing left to run.
Each check runs in a daemon thread of its own, joined for at most the timeout: a check
that never returns (a synchronous one blocked in the driver) is left behind, not waited
for (``asyncio.to_thread`` would have been: its executor is joined when the loop ends).
The checks honour the SDK's own knobs (RUNPOD_MIN_MEMORY_GB, RUNPOD_MIN_DISK_PERCENT,
RUNPOD_SKIP_AUTO_SYSTEM_CHECKS, RUNPOD_SKIP_GPU_CHECK, ...).

Imports only the standard library and runpod (scripts/gpu_inventory.py loads it alone).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


def _run_one(check: Callable, timeout: float) -> None:
    """Run ``check`` (sync or async) in a daemon thread; TimeoutError when it has not
    returned after ``timeout`` seconds; its own exception when it failed."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            if inspect.iscoroutinefunction(check):
                asyncio.run(check())
            else:
                outcome = check()
                if inspect.isawaitable(outcome):
                    asyncio.run(outcome)  # type: ignore[arg-type]
        except BaseException as exc:  # a check that calls sys.exit fails too
            box["error"] = exc

    name = getattr(check, "__name__", "check")
    thread = threading.Thread(target=target, name=f"host-check-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(name)
    if "error" in box:
        raise box["error"]


def run_checks(checks: list[Callable], timeout: float) -> HostReport:
    """Run ``checks`` in order (as the SDK does: the first failure ends the run)."""
    passed: list[str] = []
    timed_out: list[str] = []

    for check in checks:
        name = getattr(check, "__name__", "check").strip("_")
        try:
            _run_one(check, timeout)
        except TimeoutError:
            timed_out.append(name)  # no answer is not a definite one: go ahead
            continue
        except BaseException as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            return HostReport(passed, HostFailure(name, message, _category(name)), timed_out)
        passed.append(name)
    return HostReport(passed, None, timed_out)
