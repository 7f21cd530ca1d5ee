"""Diagnostics core: read vLLM's startup output, say how far it got and why it failed.

Pure: lines and a rule pack in, values out. Nothing here starts processes, opens
sockets or imports runpod, httpx or transitions; ``worker`` imports this package,
never the reverse.
"""

from diagnostics.classify.classifier import Classifier, classify_lines
from diagnostics.model import Category, Diagnosis, Evidence, State
from diagnostics.pack.rules import RulePack, RulePackError, load_pack

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
