"""Relaunching vLLM in the same container with what vLLM itself measured: data and a
pure decision.

``decide(failure, context)`` maps a failed start (its rule, category, permanence,
captures, the phase it failed in) and what the worker knows of its configuration to a
``Relaunch`` (the variables to change and why) or None. The supervisor applies it
(``apply``): the weights are on disk already, so a relaunch costs a load, not a
download. At most ``LIMIT`` relaunches per container, each kind once, each counted by
the crash-loop breaker; a relaunch never follows a fault of the host, a gated or missing
model or a configuration error a relaunch cannot change.

========================  ===========================================  =====================
kind                      when                                          changes
========================  ===========================================  =====================
``max_model_len``         MAX_MODEL_LEN=auto and vLLM reports a         MAX_MODEL_LEN=<its
                          KV-cache shortfall with its own estimate      estimate>
                          of the length that fits
``relax``                 out of memory (permanent) while loading,      ENFORCE_EAGER=true,
                          the weights known to fit (so: profiling or    MAX_NUM_BATCHED_TOKENS
                          capturing graphs); AUTO_RELAX on; what the    =min(set, 8192), each
                          user set is kept                              unless the user set it
``revision``              the revision asked for vanished (the hub's    MODEL_REVISION=""
                          404 names it) and the user did not pin it     (the default branch)
                          (a commit id is a pin)
``compile_cache``         the disk ran full writing vLLM's compile      VLLM_CACHE_ROOT=<the
                          cache on the volume                           container disk>
========================  ===========================================  =====================

The keys of ``changes`` are the worker's variable names: a name in ``FLAGS`` is a
`vllm serve` flag (an empty value removes it), any other name is an environment
variable of vLLM's process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from diagnostics import Category, State

LIMIT = 2  # relaunches per container, all kinds together
MAX_BATCHED_TOKENS = 8192
DEFAULT_BRANCH = "main"  # the branch the hub serves when no revision is given
KV_SHORTFALL = frozenset({"kv-cache-too-small-for-max-len", "kv-cache-max-len-above-capacity"})
OUT_OF_MEMORY = frozenset({"cuda-oom", "cuda-oom-allocate"})
REVISION_GONE = frozenset({"repo-not-found"})
DISK_FULL = frozenset({"disk-full"})
# Never relaunched, whatever the rule: a relaunch changes nothing these depend on.
NEVER = frozenset(
    {
        Category.CUDA_FAULT,
        Category.GATED_MODEL,
        Category.REMOTE_CODE,
        Category.BAD_CONFIG,
        Category.MODEL_REQUIREMENT,
    }
)
# The worker's variables a relaunch may change that are `vllm serve` flags; a boolean
# flag is given as "true"/"false".
FLAGS: Mapping[str, str] = {
    "MAX_MODEL_LEN": "--max-model-len",
    "ENFORCE_EAGER": "--enforce-eager",
    "MAX_NUM_BATCHED_TOKENS": "--max-num-batched-tokens",
    "MODEL_REVISION": "--revision",
}
BOOLEAN = frozenset({"ENFORCE_EAGER"})
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Relaunch:
    changes: dict[str, str]
    reason: str
    kind: str = ""


@dataclass(frozen=True)
class Failure:
    """A failed start as the decision reads it."""

    rule: str | None
    category: Category | None
    permanent: bool | None
    captures: Mapping[str, str] = field(default_factory=dict)
    phase: State = State.STARTING  # the lifecycle's state when it failed
    evidence: str = ""


@dataclass(frozen=True)
class Context:
    """What the worker knows of its configuration and of the relaunches so far."""

    max_model_len_auto: bool = False
    max_model_len: int | None = None  # the length in force (a number), if any
    user_set: frozenset[str] = frozenset()  # the worker's variables the user set
    max_num_batched_tokens: int | None = None
    auto_relax: bool = True
    revision: str | None = None
    revision_pinned: bool = False
    cache_root: str | None = None  # VLLM_CACHE_ROOT in force
    local_cache_root: str | None = None  # where a relaunch puts it
    weights_fit: bool | None = None  # the pre-flight's count: the weights fit the budget
    done: tuple[str, ...] = ()  # kinds relaunched already, in order
    breaker_allows: bool = True


def pinned(revision: str | None) -> bool:
    """A commit id is a pin (the user chose that exact snapshot); a branch or tag is not."""
    return bool(revision) and _COMMIT.fullmatch(str(revision).lower()) is not None


def _length(captures: Mapping[str, str]) -> int | None:
    value = captures.get("fit", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def _max_model_len(failure: Failure, ctx: Context) -> Relaunch | None:
    if failure.rule not in KV_SHORTFALL or not ctx.max_model_len_auto:
        return None
    fit = _length(failure.captures)
    if fit is None or fit == ctx.max_model_len:
        return None
    asked = failure.captures.get("len", str(ctx.max_model_len or "the model's length"))
    return Relaunch(
        {"MAX_MODEL_LEN": str(fit)},
        f"MAX_MODEL_LEN=auto: the KV cache cannot hold one request of {asked} tokens; "
        f"vLLM estimates that {fit} tokens fit",
        "max_model_len",
    )


def _relax(failure: Failure, ctx: Context) -> Relaunch | None:
    if failure.rule not in OUT_OF_MEMORY or failure.permanent is not True:
        return None
    if not ctx.auto_relax or failure.phase is not State.LOADING or ctx.weights_fit is not True:
        return None
    changes: dict[str, str] = {}
    if "ENFORCE_EAGER" not in ctx.user_set:
        changes["ENFORCE_EAGER"] = "true"
    if "MAX_NUM_BATCHED_TOKENS" not in ctx.user_set:
        current = ctx.max_num_batched_tokens
        changes["MAX_NUM_BATCHED_TOKENS"] = str(
            min(current or MAX_BATCHED_TOKENS, MAX_BATCHED_TOKENS)
        )
    if not changes:
        return None
    return Relaunch(
        changes,
        "vLLM ran out of memory after the weights were loaded (profiling or capturing CUDA "
        "graphs): CUDA graphs off and a smaller batch leave that memory to the KV cache "
        "(AUTO_RELAX=false turns this off)",
        "relax",
    )


def _revision(failure: Failure, ctx: Context) -> Relaunch | None:
    if failure.rule not in REVISION_GONE or not ctx.revision or ctx.revision_pinned:
        return None
    if ctx.revision == DEFAULT_BRANCH:  # the default branch itself: nothing to fall back to
        return None
    if failure.captures.get("rev") != ctx.revision:
        return None
    return Relaunch(
        {"MODEL_REVISION": ""},
        f"revision {ctx.revision!r} vanished from the hub after the pre-flight; it was not "
        "pinned to a commit, so the repo's default branch is served",
        "revision",
    )


def _compile_cache(failure: Failure, ctx: Context) -> Relaunch | None:
    root, local = ctx.cache_root, ctx.local_cache_root
    if failure.rule not in DISK_FULL or not root or not local or root == local:
        return None
    if root not in failure.evidence:
        return None
    return Relaunch(
        {"VLLM_CACHE_ROOT": local},
        f"the volume holding vLLM's compile cache ({root}) is full: the cache moves to the "
        f"container disk ({local})",
        "compile_cache",
    )


RULES = (_max_model_len, _relax, _revision, _compile_cache)


def decide(failure: Failure, ctx: Context) -> Relaunch | None:
    """The relaunch for ``failure``, or None (at most ``LIMIT``; each kind once)."""
    if len(ctx.done) >= LIMIT or not ctx.breaker_allows:
        return None
    if failure.category in NEVER:
        return None
    for rule in RULES:
        relaunch = rule(failure, ctx)
        if relaunch is not None:
            return None if relaunch.kind in ctx.done else relaunch
    return None
