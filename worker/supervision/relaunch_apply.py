"""Applying a relaunch and reading what the decision needs (the supervisor's side of
``worker.supervision.relaunch``): the `vllm serve` arguments and vLLM's environment
with the changes made (``apply``), the failure as the decision sees it (``failure_of``),
the configuration as the user set it (``context_of``), and the first length for
``MAX_MODEL_LEN=auto`` (``auto_length``). Pure but for reading a ``--config`` file the
settings already validated.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from diagnostics import Diagnosis, RulePack, State
from diagnostics.classify.normalize import normalize
from worker.config.argv import last_value
from worker.supervision.relaunch import BOOLEAN, FLAGS, Context, Failure, Relaunch, pinned


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
            skip = name == flag and "=" not in token and flag not in BOOLEAN_FLAGS
            continue
        kept.append(token)
    return kept


BOOLEAN_FLAGS = frozenset(FLAGS[name] for name in BOOLEAN)


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
        if name in BOOLEAN:
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
    """The value of the last ``flag`` in ``args``; a relaunch's boolean flag takes none."""
    return last_value(args, flag, boolean=flag in BOOLEAN_FLAGS)


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
