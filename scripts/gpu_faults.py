"""Record, on a GPU machine, what the CUDA runtime really prints when it fails, and what
the NVML seam reads while another process holds GPU memory.

The diagnosis judges cuda_fault and oom logs by the runtime's own words (torch's
allocator, CUDA's error strings, device-side asserts, NCCL). This script makes each
failure happen for real in a child process and keeps what it printed, so the rules can
be checked against today's wording, not a memory of it. It needs only python, torch
and cupy (no vLLM, no worker dependencies); the NVML part loads worker/seams/gpus.py by
path and needs ``nvidia-ml-py``. Run it from a checkout:

    python scripts/gpu_faults.py OUT.json

Each case runs under a timeout; a case that does not fail is recorded as such (its
exit code and output say so). The output goes to fixtures/gpu/ (see docs/preflight.md
and docs/diagnostics.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gpu_inventory import ROOT, load_module  # (scripts/ is on the path: run as a script)

GIB = 1024**3

_HOLD = """
import sys, torch
x = torch.empty(HOLD_GIB * 2**30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("held", flush=True)
sys.stdin.read()
"""

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "oom_allocate": (
        "import torch\ntorch.zeros(1, device='cuda')\n"
        "x = torch.empty(200 * 2**30, dtype=torch.uint8, device='cuda')\n",
        {},
    ),
    "oom_fill_then_matmul": (
        "import torch\n"
        "a = torch.randn(256, 256, device='cuda')\n"
        "chunks = []\n"
        "for size in (2**30, 2**26, 2**22, 2**20):\n"
        "    while True:\n"
        "        try:\n"
        "            chunks.append(torch.empty(size, dtype=torch.uint8, device='cuda'))\n"
        "        except torch.OutOfMemoryError:\n"
        "            break\n"
        "print('filled', len(chunks), flush=True)\n"
        "b = a @ a\n"
        "torch.cuda.synchronize()\n"
        "print('matmul ran', flush=True)\n",
        {},
    ),
    "illegal_address_torch": (
        "import torch, cupy\n"
        "torch.zeros(1, device='cuda')\n"
        "k = cupy.RawKernel(r'''extern \"C\" __global__ void poke(unsigned long long p)"
        " { *((int*)p) = 1; }''', 'poke')\n"
        "k((1,), (1,), (cupy.uint64(16),))\n"
        "torch.cuda.synchronize()\n",
        {},
    ),
    "illegal_address_cupy": (
        "import cupy\n"
        "k = cupy.RawKernel(r'''extern \"C\" __global__ void poke(unsigned long long p)"
        " { *((int*)p) = 1; }''', 'poke')\n"
        "k((1,), (1,), (cupy.uint64(16),))\n"
        "cupy.cuda.runtime.deviceSynchronize()\n",
        {},
    ),
    "device_assert": (
        "import torch\n"
        "x = torch.zeros(4, device='cuda')\n"
        "i = torch.tensor([10], device='cuda')\n"
        "y = x[i]\n"
        "torch.cuda.synchronize()\n",
        {},
    ),
    "no_visible_gpu": (
        "import torch\ntorch.zeros(1, device='cuda')\n",
        {"CUDA_VISIBLE_DEVICES": ""},
    ),
    "invalid_ordinal": (
        "import torch\ntorch.zeros(1, device='cuda:3')\n",
        {},
    ),
    "nccl_no_interface": (
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl', rank=0, world_size=1,"
        " init_method='tcp://127.0.0.1:29531', device_id=torch.device('cuda:0'))\n"
        "t = torch.ones(1, device='cuda')\n"
        "dist.all_reduce(t)\n"
        "torch.cuda.synchronize()\n"
        "print('all_reduce ran', t.item(), flush=True)\n",
        {"NCCL_SOCKET_IFNAME": "nosuchif0", "NCCL_DEBUG": "WARN"},
    ),
    "oom_creating_a_context_on_a_full_gpu": (
        "import subprocess, sys, torch\n"
        "free, total = torch.cuda.mem_get_info()\n"
        "x = torch.empty(free - 64 * 2**20, dtype=torch.uint8, device='cuda')\n"
        "torch.cuda.synchronize()\n"
        "done = subprocess.run([sys.executable, '-c', \"import torch; a = torch.randn(64, 64,"
        " device='cuda'); print((a @ a).sum().item())\"], capture_output=True, text=True)\n"
        "print(done.stdout + done.stderr, flush=True)\n"
        "sys.exit(done.returncode)\n",
        {},
    ),
    "oom_cupy": (
        "import cupy\nx = cupy.empty(200 * 2**30, dtype=cupy.uint8)\n",
        {},
    ),
    "memory_overhead": (
        "import json, torch, pynvml\n"
        "pynvml.nvmlInit()\n"
        "h = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
        "used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used\n"
        "out = {'before': used()}\n"
        "torch.zeros(1, device='cuda'); torch.cuda.synchronize()\n"
        "out['after_context'] = used()\n"
        "a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)\n"
        "b = a @ a; torch.cuda.synchronize()\n"
        "out['after_matmul'] = used()\n"
        "out['torch_reserved'] = torch.cuda.memory_reserved()\n"
        "out['torch_allocated'] = torch.cuda.memory_allocated()\n"
        "out['free_total'] = list(torch.cuda.mem_get_info())\n"
        "out['name'] = torch.cuda.get_device_name(0)\n"
        "out['capability'] = list(torch.cuda.get_device_capability(0))\n"
        "v1 = pynvml.nvmlDeviceGetMemoryInfo(h)\n"
        "out['nvml_v1'] = {'total': v1.total, 'free': v1.free, 'used': v1.used}\n"
        "v2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)\n"
        "out['nvml_v2'] = {k: getattr(v2, k) for k in ('total', 'reserved', 'free', 'used')}\n"
        "out['torch'] = torch.__version__\n"
        "out['cuda'] = torch.version.cuda\n"
        "print('MEMORY ' + json.dumps(out), flush=True)\n",
        {},
    ),
}


def _run(code: str, env: dict[str, str], timeout: float = 120.0) -> dict:
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        result = {"exit_code": done.returncode, "output": done.stdout + done.stderr}
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
        result = {"exit_code": None, "timed_out": True, "output": text}
    result["seconds"] = round(time.monotonic() - began, 2)
    result["env"] = env
    result["code"] = code
    return result


def _inventories(gpus, uuid: str | None) -> dict:
    envs: dict[str, dict[str, str]] = {
        "unset": {},
        "0": {"CUDA_VISIBLE_DEVICES": "0"},
        "1": {"CUDA_VISIBLE_DEVICES": "1"},
        "empty": {"CUDA_VISIBLE_DEVICES": ""},
        "MIG": {"CUDA_VISIBLE_DEVICES": "MIG-0"},
    }
    if uuid:
        envs["uuid_prefix"] = {"CUDA_VISIBLE_DEVICES": uuid[:12]}
    found = {}
    for name, env in envs.items():
        began = time.monotonic()
        inventory = gpus.read_inventory(env=env)
        found[name] = {
            **inventory.to_dict(),
            "uuids": [g.uuid for g in inventory.gpus],
            "seconds": round(time.monotonic() - began, 3),
        }
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python scripts/gpu_faults.py OUT.json", file=sys.stderr)
        return 2
    output = Path(args[0])
    record: dict = {"recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        record["nvidia_smi"] = subprocess.run(
            ["nvidia-smi"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        record["nvidia_smi"] = f"{type(exc).__name__}: {exc}"
    gpus = load_module("worker_gpus", ROOT / "worker" / "seams" / "gpus.py")
    first = gpus.read_inventory()
    uuid = first.gpus[0].uuid if first.gpus else None
    record["inventory"] = _inventories(gpus, uuid)
    cases = {}
    for name, (code, env) in CASES.items():
        print(f"case {name}", file=sys.stderr, flush=True)
        cases[name] = _run(code, env)
    # Another process holds GPU memory: what NVML reads, and what the allocator says.
    hold_gib = 30
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD.replace("HOLD_GIB", str(hold_gib))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = holder.stdout.readline().strip() if holder.stdout else ""
        record["held"] = {"gib": hold_gib, "holder_ready": ready == "held"}
        if ready == "held":
            record["held"]["inventory"] = _inventories(gpus, uuid)["unset"]
            print("case oom_memory_held_elsewhere", file=sys.stderr, flush=True)
            cases["oom_memory_held_elsewhere"] = _run(
                "import torch\nx = torch.empty(70 * 2**30, dtype=torch.uint8, device='cuda')\n",
                {},
            )
    finally:
        if holder.stdin:
            holder.stdin.close()
        try:
            holder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
    record["cases"] = cases
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
