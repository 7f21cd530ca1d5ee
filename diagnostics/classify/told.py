"""A failure a person tells of, not one the output shows.

People paste a log under a sentence of their own, and the sentence often quotes, in
Markdown's backticks, the error an earlier run ended with: "Yesterday's job:
`ReadTimeout: ... Read timed out` ... Re-ran today and it fails differently:", "first
run I got `RuntimeError: No CUDA GPUs are available`, switched runtimes, now:". What the
output below it shows is the evidence of this start; the quote is an account. So a
finding whose match begins inside such a quote is *told*
(:class:`diagnostics.classify.findings.Hit`): it ranks below every specific cause and
generic structure the output shows, and above a consequence or a shape (which say less
than a named cause, even a told one). When nothing else names a cause (a one-line report,
a paste cut before its error) the told cause is the verdict.

A quote is a message, not a name: a backticked stretch of at least ``MIN_WORDS`` words
or an exception line (``KeyError: 'qwen3'``), with words of the sentence before it and
no space inside either backtick (as Markdown writes a code span: the stretch between
two spans, or between a line's cut and a span, has one). The
backticks vLLM and its libraries print around a flag, a setting or a command
(``--max-model-len``, ``trust_remote_code=True``, ``pip install vllm[audio]``) are
names, not quotes. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnostics.pack.matching import Regex

MIN_WORDS = 4  # a quoted message's words at least (a command quoted has fewer)

_QUOTE = re.compile(r"`([^`\s](?:[^`\n]*[^`\s])?)`")  # no space inside either backtick
_EXCEPTION = re.compile(r"\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt): ")
_WORD = re.compile(r"[A-Za-z]{2,}")


def told(patterns: Iterable[Regex], text: str) -> bool:
    """Whether the match of ``patterns`` (a rule's) on the line ``text`` begins inside a
    message the line's sentence quotes in backticks (the first pattern that matches
    decides, as the rule's reading does)."""
    if "`" not in text:
        return False
    quotes = [(m.start(1), m.end(1)) for m in _QUOTE.finditer(text) if _quoted_message(text, m)]
    if not quotes:
        return False
    for regex in patterns:
        found = regex.search(text)
        if found is not None:
            return any(start <= found.start() < end for start, end in quotes)
    return False


def _quoted_message(text: str, quote: re.Match[str]) -> bool:
    body = quote.group(1)
    message = len(body.split()) >= MIN_WORDS or _EXCEPTION.match(body) is not None
    return message and _WORD.search(text, 0, quote.start()) is not None
