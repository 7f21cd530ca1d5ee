"""Rendering a verdict: a rule's messages with the values captured for them, and the
verdict by provenance (the verdicts of a log no rule reads: classify.unmatched).

Judging by provenance: an exception no specific rule names (its message unknown, cut
or missing) is judged by where it was raised and by its type. Where: the innermost
frame of vLLM, transformers, huggingface_hub, torch or the model repository's own code
(transformers_modules) of its traceback (standard or IPython frames), else the file
vLLM's log prefix names (``[config.py:123]``), looked up in the pack's provenance data
(:mod:`diagnostics.pack.evidence`, generated from the catalogue); an exception class
of those projects (also the one an IPython header shows) by its own raise sites. Its
type: a ``ValueError``, ``TypeError``, ``NotImplementedError``, ``KeyError`` or
``AssertionError`` (the data's ``deterministic``, with their subclasses in Python's
library: a ``JSONDecodeError``) raised by vLLM's own code while the engine is built
fails the same way on every restart, so the start is permanent with the
category of where it was raised, unless that category is a host one (a device fault,
the network). An ``AttributeError`` another project's accessor (``__getattr__``) raised
for vLLM's own lookup is the two projects' versions not fitting: permanent, ``other``.
Only verdicts of a generic-structure rule that calls the failure ``other``, transient
(the last resort), and logs that end in a traceback are refined; any structure rule's
yields to a value chosen (a message quoting a setting the start logged: bad_config).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from functools import cache

from diagnostics.classify.chosen import SETTINGS, chosen_setting
from diagnostics.classify.findings import Hit, catalogued
from diagnostics.classify.fixes import fix_for, raised_fix, unparsed_file
from diagnostics.classify.linereading import raised_class
from diagnostics.classify.normalize import WORKER_REPORT
from diagnostics.classify.progress import Origin
from diagnostics.classify.wrapping import captures
from diagnostics.model import Category, Diagnosis, Evidence, State
from diagnostics.pack.catalogue import Found
from diagnostics.pack.evidence import Provenance
from diagnostics.pack.rules import Rule, template_fields
from diagnostics.pack.templates import resolve_optional
from diagnostics.redaction.redact import Redactor, redact


def render_rule(
    rule: Rule, captured: Mapping[str, str], evidence: Evidence | None, redactor: Redactor = redact
) -> Diagnosis:
    """The diagnosis ``rule`` gives with ``captured`` values for its templates.

    The classifier renders a match with it; the worker's pre-flight renders a predicted
    failure with it (its numbers in place of captures), so both read the same.
    """
    values = {**rule.defaults, **captured}
    state = State.FAILED_PERMANENT if rule.permanent else State.FAILED_TRANSIENT
    cause, fix = rule.cause, rule.fix
    # Permanence by evidence: the captured numbers show a host condition.
    if rule.transient_if is not None and rule.transient_if.holds(captured):
        state = State.FAILED_TRANSIENT
        cause, fix = rule.transient_if.cause, rule.transient_if.fix
    cause, fix = resolve_optional(cause, captured), resolve_optional(fix, captured)
    needed = template_fields(cause) | template_fields(fix)
    safe = {name: redactor(values.get(name, "?")).strip() for name in needed}
    return Diagnosis(
        state=state,
        category=rule.category,
        rule=rule.id,
        evidence=evidence,
        cause=" ".join(redactor(cause.format_map(safe)).split()),
        fix=" ".join(redactor(fix.format_map(safe)).split()),
    )


def render_hit(
    hit: Hit,
    context: Mapping[str, str],
    provenance: Provenance | None,
    redactor: Redactor = redact,
    may_match: Callable[[str], Container[int]] | None = None,
) -> Diagnosis:
    """The verdict of a finding: by where it was raised when its rule allows and the
    ``provenance`` given says more, else its rule's. ``may_match``: the pack's
    prefilter (``captures``)."""
    evidence = Evidence(hit.line, redactor(hit.raw))
    captured = {**context, **captures(hit, may_match)}
    if provenance is not None and (hit.rule.kind == "structure" or _worker_report(hit)):
        # Generic structure (an exception line, pydantic's wrapper) or a worker's report of
        # its exception (its traceback follows): the catalogued message it holds says what
        # failed; else, for the last resort, where it was raised; any other structure
        # rule's reading yields only to a value the start was set to (bad_config).
        found = judged_by_catalogue(provenance, hit, captured, evidence, redactor)
        settings = captured.get(SETTINGS, "")
        if found is None and refinable(hit.rule):
            found = judged_by_origin(provenance, hit.origin, evidence, hit, captured, redactor)
        elif found is None and hit.rule.kind == "structure" and chosen_setting(hit.text, settings):
            found = judged_by_origin(provenance, hit.origin, evidence, hit, captured, redactor)
            found = found if found and found.category is Category.BAD_CONFIG else None
        if found is not None:
            return found
    return render_rule(hit.rule, captured, evidence, redactor)


def judged_by_catalogue(
    provenance: Provenance,
    hit: Hit,
    captured: Mapping[str, str],
    evidence: Evidence,
    redactor: Redactor = redact,
) -> Diagnosis | None:
    """The verdict of a catalogued message (whole, cut, or inside a wrapper) the finding
    shows: the category of its raise site, and its permanence (a deterministic type raised
    by vLLM's own code is permanent unless the category is a host one)."""
    found = catalogued(hit)
    if found is None:
        return None  # not catalogued, or known to say no more than "other"
    cls = raised_as(_raised(hit, captured), found)
    detail = (captured.get("detail") or hit.text).strip()
    if detail.startswith(f"{cls}: "):  # the whole exception line: its class is named above
        detail = detail[len(cls) + 2 :]
    how = "" if found.whole else " (the log shows its beginning)"
    return judged_found(provenance, found, cls, f"{how}: {detail}", evidence, redactor)


def raised_as(cls: str, found: Found) -> str:
    """The class the message ``found`` was raised as: its exception line's ``cls``, unless
    that is a wrapper's word or none (then the type its site raises, when the catalogue
    knows it: "message" is a message built before the raise, of a type not known)."""
    entry = found.entry
    if cls in ("", "Exception", "Error", WORKER_REPORT) and not entry.exception.startswith(
        "logger."
    ):
        known = entry.exception.rsplit(".", 1)[-1]
        return cls if known == "message" else known
    return cls


def judged_found(
    provenance: Provenance,
    found: Found,
    cls: str,
    said: str,
    evidence: Evidence,
    redactor: Redactor = redact,
) -> Diagnosis:
    """The verdict of the catalogued message ``found``, raised as ``cls``
    (:func:`raised_as`), ``said`` after where it was raised."""
    entry = found.entry
    category = entry.category
    deterministic = cls in provenance.deterministic and provenance.raised_by_own_code(entry.file)
    permanent = category not in _HOST and (entry.permanent or deterministic)
    where = f"{entry.file} ({entry.function or 'module'})"
    cause = f"{cls or 'The error'} raised in {where}, a {category} check{said}"
    if permanent and deterministic:
        cause += _SAME_WAY.format(where="", when=_BUILDING, checks="")
    return _judged("catalogued", category, permanent, evidence, cause, redactor)


_SAME_WAY = (
    " vLLM raises it{where} {when}{checks}, so a restart on the same settings fails the same way."
)
_BUILDING, _SERVING = "while building the engine", "while serving, after it was ready"


def _judged(
    how: str,
    category: Category,
    permanent: bool,
    evidence: Evidence | None,
    cause: str,
    redactor: Redactor,
    fix: str = "",
) -> Diagnosis:
    """A verdict judged by the catalogue (``how``: catalogued) or by where an exception
    was raised (raised-in): its rule id names the category."""
    return Diagnosis(
        state=State.FAILED_PERMANENT if permanent else State.FAILED_TRANSIENT,
        category=category,
        rule=f"{how}-{str(category).replace('_', '-')}",
        evidence=evidence,
        cause=" ".join(redactor(cause).split()),
        fix=fix or fix_for(category, permanent),
    )


# Compiled on first use (a generic verdict's): most runs never read them.
@cache
def _log_file() -> re.Pattern[str]:
    return re.compile(
        r"\b(?:ERROR|CRITICAL|WARNING|INFO)\s+\d\d-\d\d\s+[\d:.]+\s+\[?(?P<file>[\w.\-]+\.py):\d+\]"
    )


# An assertion on the parallel sizes chosen (assert total_num_kv_heads % tp_size == 0).
_PARALLEL = re.compile(
    r"\b(?:tp|pp|tensor_parallel|pipeline_parallel|tensor_model_parallel)_(?:world_)?size\b"
)
# What another host or another minute can change: never permanent by provenance.
_HOST = frozenset({Category.CUDA_FAULT, Category.NETWORK})


def _worker_report(hit: Hit) -> bool:
    """A worker's report that no rule naming its message read (a consequence)."""
    return hit.rule.kind == "consequence" and hit.text.startswith(f"{WORKER_REPORT}: ")


def refinable(rule: Rule) -> bool:
    """A verdict provenance may refine: generic structure calling it other, transient."""
    return rule.kind == "structure" and rule.category is Category.OTHER and not rule.permanent


def judged_by_origin(
    provenance: Provenance,
    origin: Origin | None,
    evidence: Evidence | None,
    hit: Hit | None = None,
    captured: Mapping[str, str] | None = None,
    redactor: Redactor = redact,
) -> Diagnosis | None:
    """The verdict where the exception was raised, or None when that says nothing."""
    cls = _raised(hit, captured) or (origin.raised if origin is not None else "")
    header = origin.header_class if origin is not None else ""
    # Without the exception line, the innermost frame shown is where the paste stops; a
    # ``raise`` code line under it shows it is where the exception was raised.
    confirmed = hit is not None or bool(origin is not None and origin.raised)
    where, category, own, read, repository, mismatch = "", None, False, False, False, ""
    for name in (cls, header):
        if name and name in provenance.exceptions:
            where, category = f"a {name}", provenance.exceptions[name]
            break
    if category is None and origin is not None and origin.path and not origin.in_library:
        # Without the exception line only a function whose raise sites agree says enough.
        # Raised in a package vLLM called (Triton, DeepGEMM: in_library), neither the
        # function's raise sites nor vLLM's determinism say anything (own stays False).
        category = provenance.of_frame(origin.path, origin.function, exact=not confirmed)
        where = f"{origin.path} ({origin.function})"
        if repository := origin.in_repository:
            where = f"the model repository's own code, {where}"
        own, read = provenance.raised_by_own_code(origin.path), unparsed_file(cls, origin.path)
    if category in (None, Category.OTHER) and under_repository(origin, cls) and confirmed:
        # A library rejecting how the repository's code called it: an API that changed
        category, repository = Category.REMOTE_CODE, True
        where = f"{where}, called by the model repository's own code"
    elif category in (None, Category.OTHER) and own and confirmed and cls == "AttributeError":
        # vLLM's code asking another project's object (its accessor) for what it lacks
        mismatch = "" if origin is None or origin.accessed == "vllm" else origin.accessed
        if mismatch:
            category = Category.OTHER
            where = f"{where}, asking {mismatch} for what its installed version lacks"
    if category is None and hit is not None and (log := _log_file().search(hit.raw)):
        category = provenance.of_log_file(log.group("file"))
        where, own = f"vLLM's {log.group('file')}", "vllm" in provenance.deterministic_in
    deterministic = (cls or header) in provenance.deterministic
    if category is None:
        if not (deterministic and (own or read) and confirmed):
            return None
        # Raised by vLLM's own code where no category holds most raise sites: still
        # deterministic, so permanent (other) rather than "a restart may help".
        category = Category.OTHER
    asserted = origin.asserted if origin is not None and (cls or header) == "AssertionError" else ""
    layout = bool(_PARALLEL.search(asserted)) and category is not Category.KV_CACHE
    # (a wrapper's message begins with the class inside it: raised_class)
    words = hit.text.partition(f"{cls}: ")[2] if hit is not None and cls else ""  # its line's
    message = ((captured or {}).get("detail") or words).strip().removeprefix(f"{cls}:").strip()
    sure = deterministic and (own or read) and category not in _HOST  # the same every start
    quoted = message or (hit.text if hit is not None else "")
    chosen = sure and chosen_setting(quoted, (captured or {}).get(SETTINGS, ""))
    if layout or chosen:  # the layout asked for, a value chosen: the user's, not the model's
        category = Category.BAD_CONFIG
    permanent = sure or bool(mismatch) or (category.permanent and (confirmed or bool(header)))
    if category is Category.OTHER and not permanent:
        return None  # says no more than the verdict it would replace
    detail = message or (asserted and f"assert {asserted}.")
    raised = f"{cls or header or 'An exception'} raised in {where}"
    cause = f"{raised}: {detail}" if detail else f"{raised} (its message is not in the log)."
    if permanent and deterministic and own:
        checks = "" if category is Category.OTHER else f" ({category} checks)"
        checks = " (a check of the parallel sizes chosen)" if layout else checks
        checks = f" (it rejects {chosen}, a value this start was set to)" if chosen else checks
        when = _SERVING if hit is not None and hit.phase is State.READY else _BUILDING
        cause += _SAME_WAY.format(where=" there", when=when, checks=checks)
    fix = raised_fix(cls or header, permanent and (own or read), permanent and repository, mismatch)
    return _judged("raised-in", category, permanent, evidence, cause, redactor, fix)


# The types an API that changed between versions raises (a name or attribute gone, a
# signature changed): under the model repository's code, its code fits another version.
_API_MISMATCH = frozenset({"AttributeError", "TypeError"})


def under_repository(origin: Origin | None, cls: str) -> bool:
    """Whether an exception of type ``cls`` raised at ``origin`` is a library rejecting a
    call from the model repository's code (transformers_modules) in its traceback."""
    return origin is not None and origin.under_repository and cls in _API_MISMATCH


def _raised(hit: Hit | None, captured: Mapping[str, str] | None) -> str:
    """The class ``hit``'s exception line says was raised (linereading.raised_class)."""
    return "" if hit is None else raised_class(hit.text, (captured or {}).get("exc") or "")
