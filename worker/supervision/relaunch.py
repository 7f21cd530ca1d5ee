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

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from diagnostics import Category, Diagnosis, RulePack, State
from diagnostics.classify.normalize import normalize

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
_BOOLEAN = frozenset({"ENFORCE_EAGER"})
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


def _drop(args: Sequence[str], flag: str) -> list[str]:
    """``args`` without ``flag`` (``--f v``, ``--f=v``; a boolean's ``--no-f`` too)."""
    negative = "--no-" + flag[2:]
    kept: list[str] = []
    skip = False
    for token in args:
        if skip:
            skip = False
            continue
        name = token.partition("=")[0].replace("_", "-")
        if name in (flag, negative):
            skip = name == flag and "=" not in token and flag not in _BOOLEAN_FLAGS
            continue
        kept.append(token)
    return kept


_BOOLEAN_FLAGS = frozenset(FLAGS[name] for name in _BOOLEAN)


def apply(
    args: Sequence[str], env: Mapping[str, str], changes: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The `vllm serve` arguments and vLLM's environment with ``changes`` made. Pure.

    A flag's earlier occurrences are removed and the new one appended (so it also beats
    a ``--config`` file); an empty value only removes it."""
    new_args, new_env = list(args), dict(env)
    for name, value in changes.items():
        flag = FLAGS.get(name)
        if flag is None:
            new_env[name] = value
            continue
        new_args = _drop(new_args, flag)
        if name in _BOOLEAN:
            if value.lower() in ("1", "true", "yes", "on"):
                new_args.append(flag)
            elif value:
                new_args.append("--no-" + flag[2:])
        elif value:
            new_args += [flag, value]
    return new_args, new_env


# -- reading the failure and the configuration (the supervisor's side of the decision)


def failure_of(diagnosis: Diagnosis, pack: RulePack, phase: State) -> Failure:
    """The decision's view of ``diagnosis``: the captures are its rule's patterns read
    again on the evidence (normalised as the classifier reads it)."""
    evidence = diagnosis.evidence.text if diagnosis.evidence else ""
    captures: dict[str, str] = {}
    with contextlib.suppress(KeyError):
        text = normalize(evidence)
        for regex in pack.by_id(diagnosis.rule or "").patterns:
            match = regex.search(text)
            for name, value in (match.groupdict() if match else {}).items():
                if value is not None and name not in captures:
                    captures[name] = value
    return Failure(
        diagnosis.rule, diagnosis.category, diagnosis.permanent, captures, phase, evidence
    )


def arg(args: Sequence[str], flag: str) -> str | None:
    """The value of the last ``flag`` in ``args`` (``--f v`` or ``--f=v``)."""
    found = None
    for index, token in enumerate(args):
        name, has_inline, inline = token.partition("=")
        if name.replace("_", "-") != flag:
            continue
        if has_inline:
            found = inline
        elif index + 1 < len(args) and (flag not in _BOOLEAN_FLAGS):
            found = args[index + 1]
        else:
            found = "true"
    return found


def _config_file(args: Sequence[str]) -> Mapping[str, Any]:
    path = arg(args, "--config")
    if not path:
        return {}
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_auto(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("auto", "-1")


def user_set(args: Sequence[str]) -> frozenset[str]:
    """The relaunch's variables the user set (an argument, or the ``--config`` file)."""
    config = _config_file(args)
    found = set()
    for name, flag in FLAGS.items():
        key = flag[2:]
        negative = "--no-" + key
        named = {token.partition("=")[0].replace("_", "-") for token in args}
        if flag in named or negative in named or key in config or key.replace("-", "_") in config:
            found.add(name)
    return frozenset(found)


def context_of(
    user_args: Sequence[str],
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    auto_relax: bool,
    weights_fit: bool | None,
    done: tuple[str, ...],
    breaker_allows: bool,
) -> Context:
    """The decision's context: ``user_args`` as the user configured them, ``args`` and
    ``env`` as the vLLM that failed got them."""
    revision = arg(args, "--revision")
    user_revision = arg(user_args, "--revision")
    return Context(
        max_model_len_auto=is_auto(arg(user_args, "--max-model-len")),
        max_model_len=_int(arg(args, "--max-model-len")),
        user_set=user_set(user_args),
        max_num_batched_tokens=_int(arg(args, "--max-num-batched-tokens")),
        auto_relax=auto_relax,
        revision=revision,
        revision_pinned=pinned(user_revision) if user_revision == revision else True,
        cache_root=env.get("VLLM_CACHE_ROOT"),
        local_cache_root=os.path.join(tempfile.gettempdir(), "vllm-cache"),
        weights_fit=weights_fit,
        done=done,
        breaker_allows=breaker_allows,
    )


def vllm_has_auto() -> bool:
    """Whether the installed vLLM takes ``--max-model-len auto`` (the flag snapshot)."""
    from worker.config.snapshot import load_flags

    flag = load_flags().by_flag.get("--max-model-len")
    return flag is not None and "auto" in str(flag.type or "")


def auto_length(args: Sequence[str], estimate: Mapping[str, Any] | None) -> Relaunch | None:
    """MAX_MODEL_LEN=auto on a vLLM without it: start at the calibrated estimate of the
    length that fits (or at the model's own length when there is none). None when
    vLLM fits the length itself, or the length is a number."""
    if not is_auto(arg(args, "--max-model-len")) or vllm_has_auto():
        return None
    fit = (estimate or {}).get("max_model_len_fit")
    if isinstance(fit, int) and not isinstance(fit, bool) and fit > 0:
        reason = "MAX_MODEL_LEN=auto: this vLLM has no auto; the estimate of what fits"
        return Relaunch({"MAX_MODEL_LEN": str(fit)}, reason, "initial")
    reason = "MAX_MODEL_LEN=auto: this vLLM has no auto and there is no estimate"
    return Relaunch({"MAX_MODEL_LEN": ""}, reason, "initial")
