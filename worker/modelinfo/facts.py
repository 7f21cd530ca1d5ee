"""What the pre-flight learned about the model, wherever it came from (hub, cache, disk):
``ModelFacts``, the one value the readers (``worker.modelinfo.hub``,
``worker.modelinfo.local``) return.

Its values passed the schema (``worker.modelinfo.schema``) before they got here: an
implausible one was dropped and is named in ``problems``. Which of its files vLLM would
fetch and load is the weight plan (``worker.modelinfo.weight_plan``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worker.modelinfo.weight_plan import WeightPlan, plan_weights


@dataclass(frozen=True)
class ModelFacts:
    """The model's config.json and files, as far as they could be read."""

    source: str  # "hub", "cache" or "local"
    config: dict[str, Any] | None = None  # config.json; None when it could not be read
    files: dict[str, int] = field(default_factory=dict)  # path -> size in bytes
    parameters: dict[str, int] | None = None  # safetensors parameter counts by dtype
    local: bool = False  # the files are already on this machine: nothing to download
    # index file name -> the weight files its weight_map names (for the indexes read)
    indexes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # values dropped as implausible

    def weight_plan(self, load_format: str = "auto") -> WeightPlan | None:
        """vLLM's choice of weight files (``weight_plan.plan_weights``); None for a load
        format not modelled here or an index that could not be read."""
        return plan_weights(self.files, self.indexes, local=self.local, load_format=load_format)

    def weight_files(self, load_format: str = "auto") -> dict[str, int]:
        """The weight files vLLM would load ({} when that is not known)."""
        plan = self.weight_plan(load_format)
        return plan.loaded if plan else {}

    def weight_bytes_for(self, load_format: str = "auto") -> int | None:
        sizes = self.weight_files(load_format)
        return sum(sizes.values()) if sizes else None

    @property
    def weight_bytes(self) -> int | None:
        return self.weight_bytes_for("auto")

    def download_files(self, load_format: str = "auto") -> dict[str, int] | None:
        """Files vLLM would fetch: one weight format plus the config and tokenizer files;
        None when that is not known."""
        plan = self.weight_plan(load_format)
        return plan.fetched if plan else None
