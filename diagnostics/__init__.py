"""Diagnostics core: read vLLM's startup output, say how far it got and why it failed.

Pure: lines and a rule pack in, values out. Nothing here starts processes, opens
sockets or imports runpod, httpx or transitions; ``worker`` imports this package,
never the reverse.

The names below are imported on first use (PEP 562), not with the package: the
``diagnose`` command imports ``diagnostics.command.cli`` through this package and
decides how its own modules are loaded before it imports them
(:mod:`diagnostics.command.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnostics.attempts.lines import classify_lines
    from diagnostics.classify.classifier import Classifier
    from diagnostics.model import Category, Diagnosis, Evidence, State
    from diagnostics.pack.rules import RulePack, RulePackError, load_pack

_HOMES = {
    "Category": "diagnostics.model",
    "Diagnosis": "diagnostics.model",
    "Evidence": "diagnostics.model",
    "State": "diagnostics.model",
    "Classifier": "diagnostics.classify.classifier",
    "classify_lines": "diagnostics.attempts.lines",
    "RulePack": "diagnostics.pack.rules",
    "RulePackError": "diagnostics.pack.rules",
    "load_pack": "diagnostics.pack.rules",
}

__all__ = [
    "Category",
    "Classifier",
    "Diagnosis",
    "Evidence",
    "RulePack",
    "RulePackError",
    "State",
    "classify_lines",
    "load_pack",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'diagnostics' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain global
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
