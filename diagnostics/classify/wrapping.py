"""Lines cut at a terminal's width, joined as the classifier reads them: such a
line's message may continue on the next line."""

from __future__ import annotations

import re
from typing import NamedTuple

from diagnostics.classify.normalize import (
    LOGGER_HEADER_START,
    OWN_PREFIX,
    continuation,
    normalize,
    unwrapped_part,
)
from diagnostics.pack.pack import MAX_MESSAGE_LINES

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
