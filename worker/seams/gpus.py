"""The one seam to the GPUs: NVML (``nvidia-ml-py``) read into an ``Inventory`` value.

Everything that needs to know about this machine's GPUs takes an ``Inventory``; only
``read_inventory`` talks to NVML, through the ``pynvml`` module it is given (tests pass
a stand-in, as no GPU exists on the machines they run on). Host memory is read the way
vLLM's CPU backend reads it (NUMA node 0's meminfo, else the whole machine), because on
that backend GPU_MEMORY_UTILIZATION is a share of host RAM.

Never raises: a missing library, no driver or a failing call gives an inventory with no
GPUs and ``error`` saying why; callers then do not judge GPU fit.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "total_gib": round(self.total_bytes / GIB, 2),
            "free_gib": round(self.free_bytes / GIB, 2),
            "capability": ".".join(map(str, self.capability)) if self.capability else None,
        }


@dataclass(frozen=True)
class HostMemory:
    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    cuda_driver: str | None = None  # CUDA version the driver supports, e.g. "12.8"
    host: HostMemory | None = None
    error: str | None = None  # why NVML gave nothing, when it did not
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.gpus)

    @property
    def min_capability(self) -> tuple[int, int] | None:
        caps = [g.capability for g in self.gpus if g.capability]
        return min(caps) if caps else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": [g.to_dict() for g in self.gpus],
            "driver": self.driver,
            "cuda_driver": self.cuda_driver,
            "host_total_gib": round(self.host.total_bytes / GIB, 2) if self.host else None,
            "host_available_gib": (
                round(self.host.available_bytes / GIB, 2) if self.host else None
            ),
            "error": self.error,
        }


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _load_pynvml() -> ModuleType:
    import pynvml

    return pynvml


def read_gpus(
    nvml: ModuleType | Any | None = None,
) -> tuple[tuple[Gpu, ...], str | None, str | None, str | None]:
    """(gpus, driver version, CUDA driver version, error) from NVML; never raises."""
    try:
        nvml = nvml if nvml is not None else _load_pynvml()
        nvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no device: not an error here
        return (), None, None, f"NVML unavailable: {type(exc).__name__}: {exc}".strip()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = None
        try:
            version = int(nvml.nvmlSystemGetCudaDriverVersion())
            cuda = f"{version // 1000}.{(version % 1000) // 10}"
        except Exception:
            pass
        gpus = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability: tuple[int, int] | None = (int(major), int(minor))
            except Exception:
                capability = None
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    total_bytes=int(memory.total),
                    free_bytes=int(memory.free),
                    capability=capability,
                )
            )
        return tuple(gpus), driver, cuda, None
    except Exception as exc:
        return (), None, None, f"NVML query failed: {type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def read_host_memory(
    node_meminfo: Path = Path("/sys/devices/system/node/node0/meminfo"),
) -> HostMemory | None:
    """Total and available memory as vLLM's CPU backend sees it (NUMA node 0, else all)."""
    try:
        fields: dict[str, int] = {}
        for line in node_meminfo.read_text().splitlines():
            parts = line.split()  # "Node 0 MemTotal:  97421888 kB"
            if len(parts) >= 4:
                fields[parts[2].rstrip(":")] = int(parts[3]) * 1024
        total = fields["MemTotal"]
        available = fields.get("MemAvailable", fields.get("MemFree", 0))
        return HostMemory(total, available)
    except (OSError, KeyError, ValueError):
        pass
    try:
        import psutil

        vm = psutil.virtual_memory()
        return HostMemory(int(vm.total), int(vm.available))
    except Exception:
        pass
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        available = os.sysconf("SC_AVPHYS_PAGES") * size
        return HostMemory(pages * size, available)
    except (ValueError, OSError):
        return None


def read_inventory(nvml: ModuleType | Any | None = None) -> Inventory:
    """The GPUs (through NVML) and host memory of this machine."""
    gpus, driver, cuda, error = read_gpus(nvml)
    return Inventory(
        gpus=gpus, driver=driver, cuda_driver=cuda, host=read_host_memory(), error=error
    )
