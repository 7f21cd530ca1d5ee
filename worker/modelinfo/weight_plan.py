"""Which of a repo's files vLLM would fetch and load (the weight plan), following vLLM
0.32's own rules (``vllm/model_executor/model_loader/default_loader.py`` and
``weight_utils.py``): one weight format, the files an index names, plus the config and
tokenizer files.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
SAFE_INDEX = "model.safetensors.index.json"  # vLLM's SAFE_WEIGHTS_INDEX_NAME
MISTRAL_INDEX = "consolidated.safetensors.index.json"
# Files transformers and vLLM fetch beside the weights (config, tokenizer, chat template,
# custom code); only at the top of the repo.
SMALL_SUFFIXES = (".json", ".txt", ".model", ".tiktoken", ".py", ".jinja")
IGNORED_PREFIXES = ("original/",)  # vLLM's default LoadConfig.ignore_patterns


@dataclass(frozen=True)
class WeightPlan:
    """What vLLM would do with the repo's files: ``fetched`` (downloaded, weights and the
    small files) and ``loaded`` (the weight files it reads)."""

    load_format: str
    loaded: dict[str, int]
    fetched: dict[str, int]


def _matches(path: str, pattern: str | frozenset[str]) -> bool:
    if isinstance(pattern, frozenset):
        return path in pattern
    return fnmatch.fnmatch(path, pattern)


def small_files(files: Mapping[str, int]) -> dict[str, int]:
    """The config, tokenizer and code files at the top of the repo."""
    return {p: s for p, s in files.items() if "/" not in p and p.endswith(SMALL_SUFFIXES)}


def plan_weights(
    files: Mapping[str, int],
    indexes: Mapping[str, frozenset[str]],
    *,
    local: bool,
    load_format: str = "auto",
) -> WeightPlan | None:
    """vLLM's choice of weight files (DefaultModelLoader._prepare_weights and
    download_weights_from_hf) among ``files`` (path -> size); ``indexes``: the weight
    files each index read names; ``local``: the files are already on this machine.
    None for a load format not modelled here or an index that could not be read."""
    kept = {p: s for p, s in files.items() if not p.startswith(IGNORED_PREFIXES)}
    top = [p for p in kept if "/" not in p]
    fmt = (load_format or "auto").lower()
    index_name = SAFE_INDEX
    if fmt == "auto":
        mistral = any(
            fnmatch.fnmatch(p.rsplit("/", 1)[-1], "consolidated*.safetensors") for p in files
        )
        fmt = "mistral" if mistral else "hf"
    patterns: list[str]
    if fmt == "hf":
        patterns = ["*.safetensors", "*.bin", "*.pt"]
    elif fmt in ("safetensors", "fastsafetensors", "instanttensor"):
        patterns = ["*.safetensors"]
    elif fmt == "mistral":
        patterns, index_name = ["consolidated*.safetensors"], MISTRAL_INDEX
    elif fmt == "pt":
        patterns = ["*.pt"]
    elif fmt == "npcache":
        patterns = ["*.bin"]
    else:
        return None  # gguf, bitsandbytes, runai_streamer, dummy...: not modelled
    if local:
        available = kept
    else:
        fetch: str | frozenset[str] | None = None
        if "*.safetensors" in patterns and SAFE_INDEX in top:
            names = indexes.get(SAFE_INDEX)
            if names is None:
                return None
            fetch = names or "*.safetensors"
        else:
            fetch = next((p for p in patterns if fnmatch.filter(top, p)), None)
        if fetch is None:
            return WeightPlan(fmt, {}, small_files(files))
        available = {p: s for p, s in kept.items() if _matches(p, fetch)}
    loaded: dict[str, int] = {}
    for pattern in patterns:
        loaded = {
            p: s for p, s in available.items() if "/" not in p and fnmatch.fnmatch(p, pattern)
        }
        if loaded:
            break
    if loaded and next(iter(loaded)).endswith(".safetensors") and index_name in top:
        names = indexes.get(index_name)
        if names is None:
            return None
        loaded = {p: s for p, s in loaded.items() if p in names}
    return WeightPlan(fmt, loaded, {**small_files(files), **available})
