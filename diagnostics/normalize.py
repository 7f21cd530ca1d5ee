"""Normalise one raw output line before matching.

Strips what wraps vLLM's message without being part of it: ANSI colour codes,
container and log-shipper gutters (docker compose, journald, kubectl, CloudWatch,
Buildkite, Modal, RunPod's console), timestamps, vLLM process prefixes such as
``(EngineCore_DP0 pid=12)`` or ``[rank0]:``, and vLLM's own
``LEVEL MM-DD HH:MM:SS [file.py:N]`` header. The raw line is kept by the caller for
evidence; this module only computes the text the rules see.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|(?<![\w\]])\[[0-9;]{1,12}m")

# Each prefix is stripped from the start of the line, repeatedly, in any order.
_PREFIXES = re.compile(
    r"""^(?:
      \s*\|\s*\d{4}-\d\d-\d\dT[\d:.]+Z?\s*\|\s*                      # CloudWatch gutter
    | \s*\|\s+(?=\[\d{4}-\d\d-\d\dT)                                # Buildkite gutter
    | \[\d{4}-\d\d-\d\dT[\d:.]+Z?\]\s*                              # Buildkite [2024-...Z]
    # ISO timestamps (docker --timestamps, kubectl --timestamps):
    | \d{4}-\d\d-\d\d[T\ ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|)?\s+
    | [A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?\s*\|\s*    # Modal gutter
    | [A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\S+\s+[\w.\-/]+(?:\[\d+\])?:\s  # journald
    | [a-z0-9]{12,20}\[(?:info|error|warning|warn|debug)\]\s?       # RunPod console
    | [\w.\-]{1,64}(?:-\d+)?\s+\|\s                                 # docker compose service |
    | \((?:[\w:.\-]+(?:\ [\w=.:\-]+)*\ )?pid=\d+(?:,\ ip=[\w.:\-]+)?\)\s*  # (EngineCore_DP0 pid=1)
    | \[rank\d+\]:\s*                                               # torch distributed
    # vLLM's own header: LEVEL MM-DD HH:MM:SS [file.py:N] (V0: without the "[")
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+
      \[?[\w.\-]+\.py:\d+\]\s?
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL):\s+                # uvicorn / logging default
    | \[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]\s*
    )""",
    re.VERBOSE,
)

_MAX_PREFIXES = 8


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line)


def clean_raw(line: str) -> str:
    """The raw line as evidence shows it: no trailing newline, CR or ANSI codes."""
    return strip_ansi(line.rstrip("\r\n")).replace("\r", " ").rstrip()


def normalize(line: str) -> str:
    """The text rules match against: the message without wrappers or prefixes."""
    text = strip_ansi(line.rstrip("\r\n")).replace("\r", " ")
    # Pastes of RunPod's console keep literal "\n" at line ends.
    if text.endswith("\\n"):
        text = text[:-2]
    for _ in range(_MAX_PREFIXES):
        match = _PREFIXES.match(text)
        if not match or match.end() == 0:
            break
        text = text[match.end() :]
    return text.rstrip()
