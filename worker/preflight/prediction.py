"""A failure the pre-flight predicts: the rule of the pack it is, and the numbers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Prediction:
    """``rule`` names a rule of the rule pack; ``values`` fill its cause/fix templates
    (as captures from vLLM's output would); ``detail`` adds what the pre-flight measured."""

    rule: str
    values: dict[str, str] = field(default_factory=dict)
    detail: str = ""
