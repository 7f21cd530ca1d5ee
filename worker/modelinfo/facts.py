"""What the pre-flight learned about the model, wherever it came from (hub, cache, disk)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class ModelFacts:
    """The model's config.json and files, as far as they could be read."""

    source: str  # "hub", "cache" or "local"
    config: dict[str, Any] | None = None  # config.json; None when it could not be read
    files: dict[str, int] = field(default_factory=dict)  # path -> size in bytes
    parameters: dict[str, int] | None = None  # safetensors parameter counts by dtype
    local: bool = False  # the files are already on this machine: nothing to download

    def weight_files(self) -> dict[str, int]:
        """The weight files vLLM would load: safetensors when there are any (vLLM's
        default load format prefers them), else the other formats."""
        safetensors = {p: s for p, s in self.files.items() if p.endswith(".safetensors")}
        if safetensors:
            return safetensors
        return {p: s for p, s in self.files.items() if p.endswith(WEIGHT_SUFFIXES)}

    @property
    def weight_bytes(self) -> int | None:
        sizes = self.weight_files()
        return sum(sizes.values()) if sizes else None

    def download_files(self) -> dict[str, int]:
        """Files vLLM would fetch: the weights it loads plus the small files."""
        small = {p: s for p, s in self.files.items() if not p.endswith(WEIGHT_SUFFIXES)}
        return {**small, **self.weight_files()}
