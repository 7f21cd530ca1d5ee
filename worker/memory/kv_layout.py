"""The KV cache as vLLM lays it out on one device: bytes per token per layer, the layer
groups of hybrid (sliding-window + full) models, blocks of ``block_size`` tokens, and
what one request of a given length needs (vLLM 0.32 plans it without the null block).

V0 sizes one uniform cache for every layer: blocks = memory // (block_size x bytes per
token of all layers); the tokens are blocks x block_size, and so is the longest request.
V1 (vLLM's kv_cache_utils) groups same-type layers into groups of equal size (padding the
last), divides memory into pages of ``block_size`` tokens x one layer, blocks = memory //
page // group size, and prints blocks // groups x block_size tokens; one request needs,
per layer, its blocks (a sliding-window layer at most window - 1 + max_num_batched_tokens
tokens, plus one block). MLA layers hold one latent (kv_lora_rank + qk_rope_head_dim) per
token, not split over tensor-parallel ranks. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.memory.arch import Arch

FULL, SLIDING = "full", "sliding"
LEN_CAP = 1 << 24  # longest length searched when nothing else bounds it


@dataclass(frozen=True)
class Group:
    kind: str  # FULL or SLIDING
    layers: int  # real layers of this kind on the device
    subgroups: int = 1  # V1 KV cache groups these layers are split into


@dataclass(frozen=True)
class KvLayout:
    token_layer_bytes: int  # bytes of one token in one layer on this device
    block_size: int
    v1: bool
    groups: tuple[Group, ...]
    group_size: int  # V1: layers per group (padded); V0: every layer
    num_groups: int  # V1 groups after splitting; V0: 1
    window: int | None
    batched_tokens: int  # max_num_batched_tokens (bounds a sliding-window layer's need)
    reserved_blocks: int = 0  # blocks held back from the length's plan (the null block)

    @property
    def layers(self) -> int:
        return sum(g.layers for g in self.groups)

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token takes on this device, padding layers of V1 groups included."""
        if self.v1:
            return self.token_layer_bytes * self.group_size * self.num_groups
        return self.token_layer_bytes * self.layers


def token_layer_bytes(arch: Arch, tp: int, cache_bytes: float, use_mla: bool) -> int:
    if arch.mla is not None and use_mla:
        return int((arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * cache_bytes)
    if arch.mla is not None:  # before MLA caching: K and V of every head (V padded to K)
        head = arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim
        return int(2 * max(1, arch.heads // tp) * head * cache_bytes)
    return int(2 * max(1, arch.kv_heads // tp) * arch.head_dim * cache_bytes)


def layer_kinds(arch: Arch, first: int, count: int) -> list[str]:
    """FULL / SLIDING for the layers [first, first + count) of the model."""
    kinds: list[str] = []
    for i in range(first, first + count):
        if arch.layer_types is not None and i < len(arch.layer_types):
            kinds.append(SLIDING if "sliding" in arch.layer_types[i] else FULL)
        elif arch.sliding_window is None:
            kinds.append(FULL)
        elif arch.sliding_pattern:
            kinds.append(FULL if (i + 1) % arch.sliding_pattern == 0 else SLIDING)
        else:
            kinds.append(SLIDING)
    return kinds


def build_layout(
    arch: Arch,
    kinds: list[str],
    per_layer: int,
    block_size: int,
    v1: bool,
    hybrid_groups: bool,
    batched_tokens: int,
) -> KvLayout:
    """Groups as vLLM forms them (V1 with the hybrid allocator), else one uniform group."""
    counts = {k: kinds.count(k) for k in (FULL, SLIDING) if kinds.count(k)}
    if not counts:
        counts = {FULL: 0}
    if not v1 or not hybrid_groups:
        # V0, and V1 before its hybrid allocator, size every layer like full attention;
        # V1 still caps a sliding-window request at its window when judging the length
        kind = SLIDING if (v1 and set(counts) == {SLIDING}) else FULL
        single = Group(kind, sum(counts.values()))
        return KvLayout(per_layer, block_size, v1, (single,), single.layers, 1,
                        arch.sliding_window, batched_tokens)  # fmt: skip
    group_size = min(counts.values())
    if max(counts.values()) < group_size * 1.5:
        group_size = max(counts.values())
    group_size = max(group_size, 1)
    num_groups = sum(-(-n // group_size) for n in counts.values())
    groups = tuple(Group(k, n, -(-n // group_size)) for k, n in counts.items())
    return KvLayout(per_layer, block_size, v1, groups, group_size, num_groups,
                    arch.sliding_window, batched_tokens)  # fmt: skip


def blocks_for_memory(layout: KvLayout, memory: float) -> int:
    if memory <= 0 or layout.token_layer_bytes <= 0 or layout.layers <= 0:
        return 0
    page = layout.token_layer_bytes * layout.block_size
    if layout.v1:
        return int(memory // page // layout.group_size)
    return int(memory // (page * layout.layers))


def block_bytes(layout: KvLayout) -> int:
    """Bytes one block takes in the pool (V1: the largest group's layers; V0: all)."""
    page = layout.token_layer_bytes * layout.block_size
    return page * (layout.group_size if layout.v1 else layout.layers)


def tokens_for_memory(layout: KvLayout, memory: float) -> int:
    """The token count vLLM reports for this much KV cache memory on each device."""
    blocks = blocks_for_memory(layout, memory)
    if layout.v1:
        return blocks // layout.num_groups * layout.block_size
    return blocks * layout.block_size


def _layer_need_blocks(layout: KvLayout, kind: str, length: int) -> int:
    bs = layout.block_size
    if kind == SLIDING and layout.window:
        tokens = min(layout.window - 1 + layout.batched_tokens, length)
        return -(-tokens // bs) + 1
    return -(-length // bs)


def memory_for_length(layout: KvLayout, length: int) -> int:
    """Bytes one request of ``length`` tokens needs on this device."""
    page = layout.token_layer_bytes * layout.block_size
    if not layout.v1:
        return -(-length // layout.block_size) * page * layout.layers
    return sum(_layer_need_blocks(layout, g.kind, length) * page * g.layers for g in layout.groups)


def longest_fitting_length(layout: KvLayout, memory: float, cap: int | None) -> int:
    """The largest length whose one request fits ``memory`` (at most ``cap``), less the
    blocks vLLM holds back from the plan."""
    limit = cap or LEN_CAP
    memory -= layout.reserved_blocks * block_bytes(layout)
    if memory <= 0 or memory_for_length(layout, 1) > memory:
        return 0
    if memory_for_length(layout, limit) <= memory:
        return limit
    low, high = 1, limit  # memory_for_length(low) fits, (high) does not
    while high - low > 1:
        mid = (low + high) // 2
        if memory_for_length(layout, mid) <= memory:
            low = mid
        else:
            high = mid
    return low


def concurrency(layout: KvLayout, memory: float, length: int) -> float:
    """How many requests of ``length`` tokens the cache holds at once (vLLM's figure)."""
    if length <= 0:
        return 0.0
    blocks = blocks_for_memory(layout, memory)
    if not layout.v1:
        return blocks * layout.block_size / length
    page = layout.token_layer_bytes * layout.block_size
    one_layer_each = sum(
        _layer_need_blocks(layout, g.kind, length) * g.subgroups for g in layout.groups
    )
    need = layout.group_size * one_layer_each * page
    per_block = page * layout.group_size
    return blocks / max(1, -(-need // per_block))
