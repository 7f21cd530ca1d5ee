"""The phase-marker captures a verdict shows (the vLLM version) that only lines
before the restart point hold, looked up backwards (for :mod:`diagnostics.scanning.fastpath`)."""

from __future__ import annotations

from functools import lru_cache
from typing import BinaryIO

import hyperscan

from diagnostics.classify.chosen import SETTINGS
from diagnostics.classify.classifier import Classifier
from diagnostics.classify.normalize import normalize
from diagnostics.classify.progress import Progress
from diagnostics.formats.streams import MAX_LINE
from diagnostics.pack.matching import prefilter_form
from diagnostics.pack.rules import RulePack, template_fields
from diagnostics.scanning.blockdb import _database, _ids_in
from diagnostics.scanning.blocktext import _always_passed, _line_starts, _text


def needed_context(classifier: Classifier) -> set[str]:
    """The phase-marker captures (the version...) the verdict would show: the named
    fields of its best rule's messages and test that a phase marker captures. The
    classifier saw only part of the lines, so their last values are looked up."""
    best = classifier.findings.best
    if best is None:
        return set()
    rule = best.rule
    names = template_fields(rule.cause) | template_fields(rule.fix)
    if rule.transient_if is not None:
        names |= set(rule.transient_if.names)
        names |= template_fields(rule.transient_if.cause) | template_fields(rule.transient_if.fix)
    if rule.kind == "structure":  # the verdict by provenance reads the settings logged
        names.add(SETTINGS)  # (the last resort's; any structure's for a value chosen)
    captured = {n for p in classifier.pack.phases for rx in p.patterns for n in rx.groupindex}
    return names & captured


@lru_cache(maxsize=64)
def _capturing(pack: RulePack, names: frozenset[str]) -> tuple[int, ...]:
    """The indexes of the pack's phase markers that capture any of ``names``."""
    return tuple(
        i
        for i, p in enumerate(pack.patterns)
        if p.kind == "phase" and names & set(p.regex.groupindex)
    )


def context_before(
    stream: BinaryIO, start: int, end: int, pack: RulePack, names: set[str]
) -> dict[str, str]:
    """The last value of each of ``names`` that a phase marker between ``start`` and
    ``end`` captured, as the classifier remembers it (read backwards, stops once all
    are found); the settings: every kind the last attempt logged, joined as
    Progress.logged joins them (read back to the attempt's first line)."""
    attempt_begun = SETTINGS not in names  # (its start read: no earlier kind counts)
    # (an attempt's first line, the version line, captures the server only)
    indexes = _capturing(pack, frozenset(names | ({"server"} if not attempt_begun else set())))
    if not indexes:
        return {}
    database = _capture_database(pack, indexes)
    found: dict[str, str] = {}
    lines: list[dict[str, str]] = []  # captures of the attempt's settings lines, last first
    pos, carry = end, b""
    while pos > start and not (names <= set(found) and attempt_begun):
        step = min(1 << 20, pos - start)
        pos -= step
        stream.seek(pos)
        data = stream.read(step) + carry
        if pos > start:
            cut = data.find(b"\n") + 1
            if not cut:  # a line longer than a block: carried whole, up to MAX_LINE
                if len(data) > MAX_LINE + (1 << 20):
                    break
                carry = data
                continue
            carry, data = data[:cut], data[cut:]
        candidates = _line_starts(data, database)
        if (b"\x1b" in data or b"\r" in data) and _line_starts(_text(data), database):
            candidates = sorted(set(candidates) | set(_always_passed(data)))
        for line_start in reversed(candidates):
            line_end = data.find(b"\n", line_start)
            line = data[line_start : line_end if line_end >= 0 else len(data)]
            captured = _phase_captures(line, pack)
            for name, value in captured.items():
                found.setdefault(name, value)
            settings = captured.get(SETTINGS)
            if settings and not attempt_begun:
                lines.append(captured)
            elif lines and captured.get("server") and not settings:
                attempt_begun = True  # the first line of the attempt whose settings were read
    if lines:  # kept and joined as the classifier keeps them: its own Progress, replayed
        replay = Progress()
        for captured in reversed(lines):
            replay.logged(captured)
        found[SETTINGS] = replay.context[SETTINGS]
    return {name: value for name, value in found.items() if name in names}


@lru_cache(maxsize=8)
def _capture_database(pack: RulePack, indexes: tuple[int, ...]) -> hyperscan.Database:
    expressions = [prefilter_form(pack.patterns[i].regex.pattern).encode() for i in indexes]
    return _database(expressions, hyperscan.HS_FLAG_ALLOWEMPTY)


def _phase_captures(raw: bytes, pack: RulePack) -> dict[str, str]:
    """What the classifier's phase markers capture on this raw line (later wins)."""
    line = raw.decode("utf-8", "replace").rstrip("\r\n")
    text = normalize(line)
    captured: dict[str, str] = {}
    for index in sorted(_ids_in(text.encode("utf-8", "surrogateescape"), pack.line_database)):
        pattern = pack.patterns[index]
        if pattern.kind == "phase" and (match := pattern.regex.search(text)):
            captured.update({k: v for k, v in match.groupdict().items() if v})
    return captured
