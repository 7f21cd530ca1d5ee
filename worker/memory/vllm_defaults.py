"""What vLLM decides when the settings leave it to vLLM, by version and engine: batch
limits, chunked prefill, CUDA-graph capture sizes, and which memory its start-up
profile counts before the KV cache is sized. Read from vLLM's own code (engine/
arg_utils.py, config.py's SchedulerConfig, worker/worker.py and v1/worker/gpu_worker.py
of 0.5.4, 0.6.5, 0.8.3, 0.11.0 and 0.32.0). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1024**3
Version = tuple[int, int, int]
LATEST: Version = (0, 32, 0)
LATEST_V0: Version = (0, 10, 2)  # V0 was removed in 0.11
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")

# Memory outside torch's allocator that the profile counts. From 0.6.5 (V0) and 0.9 (V1)
# vLLM counts only its growth since the worker started (cuBLAS/NCCL workspaces; in V1
# also torch.compile's and Triton's kernels): 0.01-0.26 GiB in the V0 calibration rows,
# 0.33 GiB in the one V1 row that prints it. V0 0.6.4 and V1 before 0.9 counted the
# device's whole non-torch memory, the CUDA context included (0.35 GiB in 0.6.4's row,
# i.e. a context of about 0.25 GiB on top of V0's growth).
NON_TORCH_V0 = 0.10 * GIB
NON_TORCH_V1 = 0.30 * GIB
CUDA_CONTEXT = 0.25 * GIB
# CUDA-graph pool memory per decoder layer and captured batch size (the calibration
# rows: V0 0.18-0.20 MiB, V1 0.29-0.37 MiB), and V0's floor for a single graph.
GRAPH_LAYER_SIZE_V0 = 0.19 * 1024**2
GRAPH_LAYER_SIZE_V1 = 0.35 * 1024**2
GRAPH_FLOOR_V0 = 0.02 * GIB
# Peak bytes per logit of the profile's sampler over max_num_seqs rows x vocabulary.
# The PyTorch top-k/top-p path (V0 always; V1 0.8, whose FlashInfer >= 0.2.3 was
# disabled; V1 0.32, which also warms it) sorts: logits in the model dtype and fp32,
# sorted values and int64 indices, softmax, cumsum, masks and the re-sorted result
# (V0 keeps more of them alive: ~40 bytes; V1 ~32). V1 0.9-0.31 samples with FlashInfer
# from fp32 probabilities (~10 bytes).
SAMPLER_BYTES_V0 = 40
SAMPLER_BYTES_V1_NATIVE = 32
SAMPLER_BYTES_V1_FLASHINFER = 10
# The CPU backend's block size, and the version read with it and with the null block
# held back from the length's plan (0.32.0). Earlier versions are taken without either
# (R41, 0.15.1 on a GPU, prints an estimated length with no block held back).
CPU_BLOCK_SIZE = 128
CPU_BLOCKS_FROM: Version = (0, 32, 0)
NULL_BLOCK_FROM: Version = (0, 32, 0)


def parse_version(text: object) -> Version | None:
    if not isinstance(text, str):
        return None
    found = _VERSION.match(text.strip().lstrip("v"))
    if not found:
        return None
    return (int(found.group(1)), int(found.group(2)), int(found.group(3) or 0))


def resolve_engine(engine: object, version: Version | None) -> str:
    """ "V0" or "V1": as given, else the version's default (V1 from 0.8, V0 removed 0.11)."""
    if isinstance(engine, str) and engine.upper() in ("V0", "V1"):
        return engine.upper()
    return "V0" if version is not None and version < (0, 8, 0) else "V1"


@dataclass(frozen=True)
class Scheduler:
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool


@dataclass(frozen=True)
class SchedulerAsk:
    """What the defaults depend on."""

    engine: str
    version: Version
    max_model_len: int
    gpu_total: float | None  # bytes
    gpu_name: str
    llm_class: bool
    multimodal: bool
    pooling: bool
    sliding: bool
    lora: bool
    batched_tokens: int | None
    num_seqs: int | None
    chunked: bool | None


def _v0(ask: SchedulerAsk) -> Scheduler:
    chunked = ask.chunked
    if chunked is None:
        chunked = ask.max_model_len > 32768 and not (
            ask.multimodal or ask.sliding or ask.lora or ask.pooling
        )
    tokens = ask.batched_tokens
    if tokens is None:
        if chunked:
            tokens = 512 if ask.version < (0, 6, 0) else 2048
        else:
            tokens = max(ask.max_model_len, 2048)
        if ask.pooling:
            tokens = max(tokens, 32768)
        if ask.multimodal and ask.version >= (0, 6, 0):
            tokens = max(tokens, 5120)
    return Scheduler(tokens, ask.num_seqs or 256, chunked)


def _v1_big_gpu(ask: SchedulerAsk) -> bool:
    name = ask.gpu_name.lower()
    if ask.version < (0, 9, 0):
        return "h100" in name or "h200" in name
    total = ask.gpu_total or 0
    return total >= 70 * GIB and "a100" not in name


def _v1(ask: SchedulerAsk) -> Scheduler:
    big = _v1_big_gpu(ask)
    huge = (ask.gpu_total or 0) >= 160 * GIB and ask.version >= (0, 20, 0)
    chunked = ask.chunked if ask.chunked is not None else not ask.pooling
    tokens = ask.batched_tokens
    if tokens is None:
        if huge:
            tokens = 16384
        elif ask.llm_class:
            tokens = 16384 if big else 8192
        else:
            tokens = 8192 if big else 2048
        if not chunked:
            tokens = max(tokens, ask.max_model_len)
    seqs = ask.num_seqs or (1024 if (big or huge) and ask.version >= (0, 9, 0) else 256)
    return Scheduler(tokens, seqs, chunked)


def scheduler_defaults(ask: SchedulerAsk) -> Scheduler:
    return _v0(ask) if ask.engine == "V0" else _v1(ask)


def capture_sizes(engine: str, version: Version, max_num_seqs: int, batched: int) -> int:
    """How many batch sizes CUDA graphs are captured for."""
    if engine == "V0":
        sizes = [1, 2, 4, *range(8, 257, 8)]
        return max(1, sum(1 for s in sizes if s <= max(max_num_seqs, 1)))
    cap = min(2 * max_num_seqs, 512) if version >= (0, 9, 0) else 512
    sizes = [1, 2, 4, *range(8, cap + 1, 8)]
    return max(1, sum(1 for s in sizes if s <= min(cap, batched)))


def graph_bytes(engine: str, layers: int, sizes: int) -> float:
    if engine == "V0":
        return GRAPH_FLOOR_V0 + GRAPH_LAYER_SIZE_V0 * layers * sizes
    return GRAPH_LAYER_SIZE_V1 * layers * sizes


def graphs_counted_before_kv(engine: str, version: Version, eager: bool) -> bool:
    """V1 from 0.21 subtracts its CUDA-graph estimate before sizing the KV cache; V0 and
    older V1 capture graphs afterwards, on top of the utilization budget."""
    return engine == "V1" and not eager and version >= (0, 21, 0)


def non_torch_bytes(engine: str, version: Version) -> float:
    if engine == "V1":
        return NON_TORCH_V1 + (CUDA_CONTEXT if version < (0, 9, 0) else 0.0)
    if (0, 6, 4) <= version < (0, 6, 5):
        return NON_TORCH_V0 + CUDA_CONTEXT
    return NON_TORCH_V0


def sampler_bytes(engine: str, version: Version) -> int:
    if engine == "V0":
        return SAMPLER_BYTES_V0
    if (0, 9, 0) <= version < (0, 32, 0):
        return SAMPLER_BYTES_V1_FLASHINFER
    return SAMPLER_BYTES_V1_NATIVE


def uses_mla_cache(engine: str, version: Version) -> bool:
    """vLLM caches MLA's compressed latent from 0.7.1 (before: full K and V per head)."""
    return version >= (0, 7, 1)


def default_block_size(platform: str, version: Version, mla: bool, model_type: str) -> int:
    """Tokens per KV-cache block when BLOCK_SIZE is not set: 16, except on vLLM 0.32's
    CPU backend (platforms/cpu.py): 128, 16 for its reference MLA kernel, 256 for
    DeepSeek-V4."""
    if platform != "cpu" or version < CPU_BLOCKS_FROM:
        return 16
    if model_type == "deepseek_v4":
        return 256
    return 16 if mla else CPU_BLOCK_SIZE


def reserved_blocks(engine: str, version: Version) -> int:
    """Blocks the length is not planned on: V1 0.32 (kv_cache_utils.get_kv_cache_configs)
    holds back the null block BlockPool keeps, for auto-fit and the capacity check."""
    return 1 if engine == "V1" and version >= NULL_BLOCK_FROM else 0


def hybrid_allocator(engine: str, version: Version) -> bool:
    """V1 groups sliding-window and full-attention layers separately from 0.10."""
    return engine == "V1" and version >= (0, 10, 0)
