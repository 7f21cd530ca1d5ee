"""The RunPod SDK imported without its one-second CPU probe.

``runpod.serverless.utils.rp_debugger`` (runpod 1.12) names the processor for its debug
output at import time with ``cpuinfo.get_cpu_info()["brand_raw"]``. py-cpuinfo answers
that by starting a second Python interpreter (``python cpuinfo.py --json``), about 1.1 s
of every worker's cold start on this machine. ``install()`` replaces that one function,
before the SDK is imported, with the same brand name read from ``/proc/cpuinfo`` in this
process (what the kernel reports from CPUID; ``platform.processor()`` elsewhere).
Nothing else in the worker process uses py-cpuinfo; vLLM runs in a process of its own.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
BRAND_KEYS = ("model name", "Model", "cpu model", "Processor")  # x86, arm, mips, older arm


def brand_from(lines: Iterable[str]) -> str | None:
    """The processor's brand in /proc/cpuinfo lines: the first known key with a value."""
    found: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in BRAND_KEYS and value.strip():
            found.setdefault(key, value.strip())
    return next((found[key] for key in BRAND_KEYS if key in found), None)


def processor_brand(cpuinfo: Path = CPUINFO) -> str:
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as lines:
            brand = brand_from(lines)
    except OSError:
        brand = None
    return brand or platform.processor() or "Unable to get processor info."


def _brand_only() -> dict[str, Any]:
    return {"brand_raw": processor_brand()}


def install() -> None:
    """Replace ``cpuinfo.get_cpu_info`` unless the SDK already ran it."""
    if "runpod.serverless.utils.rp_debugger" in sys.modules:
        return
    try:
        import cpuinfo  # type: ignore[import-untyped]
    except ImportError:  # an SDK without py-cpuinfo has no probe to avoid
        return
    cpuinfo.get_cpu_info = _brand_only
