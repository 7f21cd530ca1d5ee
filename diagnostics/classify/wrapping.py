"""Lines cut at a terminal's width, joined as the classifier reads them: such a
line's message may continue on the next line; and a finding's evidence read whole with
its continuation lines (what its rule captures there, the specific reading a paste's
reflow hid)."""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from diagnostics.classify.normalize import (
    LOGGER_HEADER_START,
    OWN_PREFIX,
    continuation,
    normalize,
    unwrapped_part,
)
from diagnostics.pack.pack import MAX_MESSAGE_LINES
from diagnostics.pack.rules import Rule

if TYPE_CHECKING:  # (findings reads this module's MAX_WRAPPED_PARTS)
    from diagnostics.classify.findings import Hit

# A message hard-wrapped over more lines is not joined further: the most lines one
# message is read over (a rule's message_lines too).
MAX_WRAPPED_PARTS = MAX_MESSAGE_LINES


class Wrapped(NamedTuple):
    """Lines cut at a terminal's width, joined: the message may continue on the next line."""

    last: int  # line number of the last part
    first: int  # line number of the first part (the evidence)
    clean: str  # the joined raw lines (for evidence)
    text: str  # the first part normalised, the rest appended as printed
    parts: int
    width: int  # the first part's length as printed: no continuation is longer


# vLLM's logger header (under a process's own prefix): the start of a record of its own.
_RECORD_START = re.compile(rf"^(?:{OWN_PREFIX} ?)?{LOGGER_HEADER_START}")


def continues(wrapped: Wrapped, line: str) -> bool:
    """Whether raw ``line`` can be the next part of ``wrapped``: a terminal cuts every
    part but the last at the same width, so a longer line is a line of its own (a line
    of exactly a common width, such as pydantic's 80-column "1 validation error for
    ModelConfig", is followed by its message, not by the rest of it); so is a line that
    begins with vLLM's logger header (a message of exactly a common width, followed by
    the next record: the rest of a cut message never begins with a header)."""
    part = unwrapped_part(line)
    return len(part) <= wrapped.width and _RECORD_START.match(part) is None


def carry(wrapped: Wrapped | None, line: str, lineno: int) -> Wrapped:
    """Line ``lineno`` looks cut at a terminal's width: keep it for joining with the next."""
    part = unwrapped_part(line)
    if wrapped is not None and wrapped.parts < MAX_WRAPPED_PARTS:
        part = continuation(part, wrapped.clean)
        return Wrapped(
            lineno,
            wrapped.first,
            wrapped.clean + part,
            wrapped.text + part,
            wrapped.parts + 1,
            wrapped.width,
        )
    # The message without its prefixes, and the spaces the cut fell after.
    trailing = part[len(part.rstrip()) :]
    return Wrapped(lineno, lineno, part, normalize(line) + trailing, 1, len(part))


def joined(hit: Hit, count: int | None = None) -> list[str]:
    """The evidence with its first ``count`` continuation lines (all: None), read as a
    terminal's cut (the parts as printed, one after the other) and as lines of their own
    (joined by a space)."""
    following = hit.following if count is None else hit.following[:count]
    if not following:
        return [hit.text]
    cut = hit.text + "".join(following)  # each part with the spaces the cut fell after
    return [cut, " ".join([hit.text, *(part.strip() for part in following)])]


def refined(hit: Hit, rules: Sequence[Rule], rule_ids: Callable[[str], Iterable[int]]) -> Hit:
    """The evidence read whole when a paste reflowed it: a narrow reflow can cut a
    message's opening before the words a specific rule reads ("CUDA out of" |
    "memory. Tried to allocate ..."), so the line alone matched only a general rule of
    the same category (the exception's class). When the line joined with its
    continuation lines matches a rule of the same category and kind, without
    conditions, that the pack places before it (the specific reading of the same
    message), that rule reads the finding. ``rule_ids``: the priorities of the rules
    whose patterns match a text."""
    if not hit.following or hit.header:
        return hit
    texts = [text for n in range(1, len(hit.following) + 1) for text in joined(hit, n)]
    better = min(
        (
            priority
            for text in texts
            for priority in rule_ids(text)
            if priority < hit.rule.priority and _same_reading(rules[priority], hit.rule)
        ),
        default=None,
    )
    return hit if better is None else hit._replace(rule=rules[better])


def _same_reading(rule: Rule, than: Rule) -> bool:
    return (
        rule.category is than.category
        and rule.kind == than.kind
        and not (rule.traceback_through or rule.after or rule.before_ready)
    )


def captures(hit: Hit, may_match: Callable[[str], Container[int]] | None = None) -> dict[str, str]:
    """What the rule's patterns capture on the evidence and its continuation lines.
    ``may_match``: the ``id`` of every pattern that may match a text (the pack's
    prefilter, which never misses a match RE2 would find): the others are not run on it.
    A rule of 436 patterns ran each on every text: 60 RE2 searches a verdict."""
    capturing = [regex for regex in hit.rule.patterns if regex.groupindex]
    if not capturing:  # a rule whose patterns capture nothing: no text to scan
        return {}
    texts = [hit.text]
    for n in range(1, len(hit.following) + 1):
        texts += joined(hit, n)
    maybe = [may_match(text) if may_match is not None else None for text in texts]
    found: dict[str, str] = {}
    for regex in capturing:
        for text, candidates in zip(texts, maybe, strict=True):
            if candidates is not None and id(regex) not in candidates:
                continue
            match = regex.search(text)
            if not match:
                continue
            for name, value in match.groupdict().items():
                if value is not None and name not in found:
                    found[name] = value
    return found
