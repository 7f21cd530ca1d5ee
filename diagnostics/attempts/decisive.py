"""Which failures name a cause of their own, and which a step before vLLM's start left.

A verdict is decisive when it names a cause (a specific cause or generic structure, also
as judged by the catalogue or by where it was raised), not a consequence, a shape or the
last resort. Some failures only a vLLM process of its own has (its memory, its flags,
the model's code it loads); the others may come before any start (a download step's, an
import's). And some failures are what the model's files can cause (no model in a local
folder, weights missing, cut or half converted): when a step above vLLM's first start,
which was to fetch, convert or copy those files, failed on a cause of its own, that
failure is the root cause (docs/diagnostics.md, "Several attempts in one log").

Pure: verdicts in, a verdict out."""

from __future__ import annotations

import re
from collections.abc import Callable

from diagnostics.classify.normalize import LOGGER_HEADER
from diagnostics.classify.progress import warned
from diagnostics.model import Category, Diagnosis
from diagnostics.pack.catalogue import load_catalogue
from diagnostics.pack.rules import RulePack

# Verdicts an attempt's own cause gives (not a consequence, a shape or a bare exit: a
# crash loop's last attempt cut short would otherwise replace the cause seen before).
_DECISIVE_KINDS = frozenset({"cause", "structure"})
_DERIVED = ("catalogued-", "raised-in-")


def decisive(diagnosis: Diagnosis, pack: RulePack) -> bool:
    """Whether a failed verdict names a cause of its own (a specific cause or generic
    structure, also as judged by the catalogue or by where it was raised; not the last
    resort, a bare exception that names no category: a test harness's "Server exited
    unexpectedly" after the start it waited for failed)."""
    rule = diagnosis.rule or ""
    if not diagnosis.failed or diagnosis.evidence is None:
        return False
    if rule.startswith(_DERIVED):
        return True
    found = pack.verdicts_rule(rule)
    if found is None:  # a shape: no cause of its own
        return False
    last_resort = found.kind == "structure" and found.generic and found.category is Category.OTHER
    return found.kind in _DECISIVE_KINDS and not last_resort


# What only a vLLM process of its own fails on, and no step before its start prints: the
# engine's memory (it runs out once the engine loads), its flags (rejected as it parses
# them: a process that then ends), the model's code it loads. Such a failure above the
# first start the log shows is an earlier attempt's whose start was not kept (a
# notebook's tail, a previous container's last lines, a retry with other flags). So is
# a device fault that only an engine that runs prints (a rule's engine_only: a kernel's
# fault, a communicator's), unlike one at import (no GPU found, the driver too old).
_ITS_OWN = frozenset({Category.OOM, Category.KV_CACHE, Category.BAD_CONFIG, Category.REMOTE_CODE})


def before_any_start(diagnosis: Diagnosis, pack: RulePack) -> bool:
    """Whether a failure may come before vLLM announced any start (a download step's, an
    import's, the platform's detection): it stands when no attempt began before it. Not
    one a person quotes in Markdown's backticks ("Because of `GatedRepoError: 401 ...`
    I downloaded it elsewhere"): an earlier run's, told above the log it led to; nor a
    message only vLLM's own code prints (:func:`_vllms_own`)."""
    rule = pack.verdicts_rule(diagnosis.rule)
    evidence = diagnosis.evidence
    if evidence is not None and (_QUOTED.search(evidence.text) or _vllms_own(evidence.text)):
        return False
    return diagnosis.category not in _ITS_OWN and not (rule is not None and rule.engine_only)


def _vllms_own(text: str) -> bool:
    """Whether ``text`` holds a message only vLLM's own code prints (the catalogue's,
    mined from vLLM's sources): no step before its start (a download's, a conversion's,
    an install's) prints it, so above the first start a log shows it is an earlier
    attempt's ("On 0.3.3 I was getting <vLLM's ValueError>, so I upgraded: <the log>")."""
    found = load_catalogue().lookup(text)
    return found is not None and found.entry.file.startswith("vllm/")


# An exception named in backticks, as a person quotes one in a sentence.
_QUOTED = re.compile(r"`(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): ")


# What no step that fetches, converts or copies files fails on (an earlier attempt's).
_NOT_A_STEP = _ITS_OWN | {Category.CUDA_FAULT}
# What an install step fails on (pip: its index or a git host unreachable, its own error);
# a hub's refusal or a missing repo leaves no package out.
_INSTALLING = frozenset({Category.NETWORK, Category.OTHER})


_LOCAL = re.compile(r"""(?:^|[\s'"`(])(?:/|\./|~/)[\w.-]""")


def may_be_left(verdict: Diagnosis, pack: RulePack) -> bool:
    """Whether ``verdict`` is a failure a step above vLLM's start can leave: no model in a
    local folder, a rule's ``of_the_files`` (weights missing, cut or half converted) or
    ``of_the_packages`` (what a start script's install was to add to the image: a module,
    a transformers that knows the model's type)."""
    evidence = verdict.evidence
    if verdict.category is Category.MODEL_NOT_FOUND:
        return evidence is not None and bool(_LOCAL.search(evidence.text))
    rule = pack.verdicts_rule(verdict.rule)
    return rule is not None and (rule.of_the_files or rule.of_the_packages)


def left_by_a_step(
    verdict: Diagnosis, first_start: int, before: Callable[[], Diagnosis], pack: RulePack
) -> Diagnosis:
    """``verdict``, or the failure of a step above vLLM's first start (line
    ``first_start``; ``before()``: their verdict) when vLLM then failed on the model's
    files (:func:`may_be_left`): the conversion, merge, download or copy that was to fill
    the folder failed on a cause of its own (:func:`decisive`; not a warning vLLM logged
    at import, nor what vLLM printed, under its logger's header or in its own words, nor
    what only a vLLM process of its own or the device fails on: an earlier attempt's)."""
    evidence = verdict.evidence
    if not evidence or evidence.line < first_start or not may_be_left(verdict, pack):
        return verdict  # (a repo id or URL: no step before makes the hub lack it)
    step = before()
    if not decisive(step, pack) or step.evidence is None or warned(step.evidence.text):
        return verdict
    if LOGGER_HEADER.search(step.evidence.text) or _vllms_own(step.evidence.text):
        return verdict  # (vLLM printed it, under its logger's header: no step's program)
    if verdict.category is Category.MODEL_NOT_FOUND:
        return step
    rule = pack.verdicts_rule(verdict.rule)
    if step.category in _NOT_A_STEP or (
        rule is not None and not rule.of_the_files and step.category not in _INSTALLING
    ):
        return verdict  # (what the image lacks: only an install step's failure leaves it)
    return step
