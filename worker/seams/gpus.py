"""The one seam to the GPUs: NVML (``nvidia-ml-py``) read into an ``Inventory`` value.

Everything that needs to know about this machine's GPUs takes an ``Inventory``; only
``read_inventory`` talks to NVML, through the ``pynvml`` module it is given (tests pass
a stand-in, as no GPU exists on the machines they run on). Host memory is read the way
vLLM's CPU backend reads it (NUMA node 0's meminfo, else the whole machine), because on
that backend GPU_MEMORY_UTILIZATION is a share of host RAM.

Never raises: a missing library, no driver or a failing call gives an inventory with no
GPUs and ``error`` saying why; callers then do not judge GPU fit.

Never hangs: NVML runs in a daemon thread joined for ``NVML_DEADLINE_S``; a call that has
not returned by then (``nvmlInit`` on a wedged driver never does) gives an inventory with
``nvml_hung`` set, which the pre-flight treats as a faulty host.

The GPUs are those vLLM will use: ``CUDA_VISIBLE_DEVICES`` (indexes, ``GPU-`` UUIDs or
their unique prefixes; CUDA stops at the first entry it cannot read) is applied in CUDA's
order. NVML numbers GPUs in PCI bus order; CUDA does too with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and by default (``FASTEST_FIRST``) only when the GPUs
are all alike. Where the mapping cannot be known (GPUs of several kinds without
PCI_BUS_ID, MIG instances, a repeated entry), no GPU is listed and ``error`` says why.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

GIB = 1024**3
NVML_DEADLINE_S = 30.0  # nvmlInit takes well under a second, a few on a cold 8-GPU host


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int] | None
    uuid: str | None = None

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
    nvml_hung: bool = False  # NVML did not return within its deadline: a faulty host

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


def _memory(nvml: ModuleType | Any, handle: Any) -> tuple[int, int]:
    """(total, free) bytes of one GPU as CUDA reports them, and so as vLLM budgets them.

    NVML's plain total counts the memory the driver reserves for itself; CUDA's total
    (``torch.cuda.mem_get_info``, which vLLM multiplies by GPU_MEMORY_UTILIZATION) does
    not. On an H100 80GB NVML says 79.65 GiB and CUDA 79.18 GiB (fixtures/gpu/): the
    0.47 GiB the driver keeps. NVML's v2 query reports that reservation; a driver or
    library without it gives the plain total."""
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        return int(info.total) - int(info.reserved), int(info.free)
    except Exception:
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.total), int(info.free)


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
            total, free = _memory(nvml, handle)
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability: tuple[int, int] | None = (int(major), int(minor))
            except Exception:
                capability = None
            try:
                uuid: str | None = _text(nvml.nvmlDeviceGetUUID(handle))
            except Exception:
                uuid = None
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    total_bytes=total,
                    free_bytes=free,
                    capability=capability,
                    uuid=uuid,
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


def visible_gpus(gpus: tuple[Gpu, ...], env: Mapping[str, str]) -> tuple[Gpu, ...] | str:
    """The GPUs CUDA (and so vLLM) will use, in CUDA's order; a string saying why when
    that cannot be known."""
    order = env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper()
    alike = len({(g.name, g.total_bytes, g.capability) for g in gpus}) <= 1
    known_order = order == "PCI_BUS_ID" or alike
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        if not known_order:
            return "GPUs of several kinds and CUDA_DEVICE_ORDER is not PCI_BUS_ID"
        return gpus
    chosen: list[Gpu] = []
    for raw in listed.split(","):
        entry = raw.strip()
        if entry.startswith("MIG-"):
            return "CUDA_VISIBLE_DEVICES names MIG instances (not modelled)"
        if entry.startswith("GPU-"):
            found = [g for g in gpus if g.uuid and g.uuid.startswith(entry)]
            if len(found) != 1:
                break  # unknown or ambiguous: CUDA ignores this entry and the rest
            gpu = found[0]
        else:
            digits = entry[: len(entry) - len(entry.lstrip("0123456789"))]
            if not digits or int(digits) >= len(gpus):
                break
            if not known_order:
                return "GPUs of several kinds and CUDA_DEVICE_ORDER is not PCI_BUS_ID"
            gpu = gpus[int(digits)]
        if gpu in chosen:
            return "CUDA_VISIBLE_DEVICES names a GPU twice"
        chosen.append(gpu)
    if not chosen:
        return f"CUDA_VISIBLE_DEVICES={listed!r} leaves no GPU visible"
    return tuple(chosen)


def _within(work: Any, deadline_s: float) -> tuple[bool, Any]:
    box: dict[str, Any] = {}

    def target() -> None:
        box["result"] = work()

    thread = threading.Thread(target=target, name="nvml", daemon=True)
    thread.start()
    thread.join(deadline_s)
    return (not thread.is_alive() and "result" in box), box.get("result")


def read_inventory(
    nvml: ModuleType | Any | None = None,
    *,
    env: Mapping[str, str] | None = None,
    deadline_s: float = NVML_DEADLINE_S,
) -> Inventory:
    """The GPUs vLLM will use (through NVML, within ``deadline_s``) and host memory."""
    host = read_host_memory()
    done, found = _within(lambda: read_gpus(nvml), deadline_s)
    if not done:
        return Inventory(
            host=host,
            error=f"NVML did not answer within {deadline_s:g} s (nvmlInit or a device "
            "query hung: a wedged GPU driver)",
            nvml_hung=True,
        )
    gpus, driver, cuda, error = found
    visible = visible_gpus(gpus, os.environ if env is None else env) if gpus else gpus
    if isinstance(visible, str):
        gpus, error = (), f"which GPUs vLLM uses is not known: {visible}"
    else:
        gpus = visible
    return Inventory(gpus=gpus, driver=driver, cuda_driver=cuda, host=host, error=error)
