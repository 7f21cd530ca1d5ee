"""What the pre-flight learned about the model, wherever it came from (hub, cache, disk).

Everything here was written by someone else (a hub, a mirror, a model folder): the
values are checked against a schema (``clean_config``, ``check_listing``) before any
verdict reads them, and an implausible value is dropped so that what depends on it is
"unknown", never a verdict. Which files count follows vLLM 0.32's own rules
(``vllm/model_executor/model_loader/default_loader.py`` and ``weight_utils.py``): one
weight format, the files an index names, plus the config and tokenizer files.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
SAFE_INDEX = "model.safetensors.index.json"  # vLLM's SAFE_WEIGHTS_INDEX_NAME
MISTRAL_INDEX = "consolidated.safetensors.index.json"
# Files transformers and vLLM fetch beside the weights (config, tokenizer, chat template,
# custom code); only at the top of the repo.
SMALL_SUFFIXES = (".json", ".txt", ".model", ".tiktoken", ".py", ".jinja")
IGNORED_PREFIXES = ("original/",)  # vLLM's default LoadConfig.ignore_patterns

# Plausible ranges. The hub's own limit is 50 GB per file; the largest public repos hold a
# few thousand files and a few TB; the largest models a few 10^12 parameters.
MAX_FILES = 20_000
MAX_FILE_BYTES = 1 << 40  # 1 TiB
MAX_TOTAL_BYTES = 1 << 45  # 32 TiB
MAX_PARAMETERS = 10**14
MAX_NAME = 1024

_Count = Annotated[StrictInt, Field(ge=1, le=1 << 32)]
_Dim = Annotated[StrictInt, Field(ge=1, le=1 << 24)]
_Name = Annotated[StrictStr, Field(min_length=1, max_length=256)]


class _Rope(BaseModel):
    model_config = ConfigDict(extra="allow")
    factor: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = None
    rope_type: StrictStr | None = None
    type: StrictStr | None = None


# config.json keys the pre-flight reads, each with its schema, grouped by what depends on
# them: a bad value in a group makes the whole group unknown (a bad num_key_value_heads
# must not fall back to num_attention_heads and over-count the KV cache).
_POSITIONS: dict[str, TypeAdapter[Any]] = {
    **{
        key: TypeAdapter(_Count)
        for key in (
            "max_position_embeddings",
            "n_positions",
            "max_seq_len",
            "seq_length",
            "max_target_positions",
            "max_sequence_length",
            "max_seq_length",
            "seq_len",
            "model_max_length",
        )
    },
    "rope_scaling": TypeAdapter(_Rope | None),
    "rope_parameters": TypeAdapter(_Rope | None),
}
_LAYOUT: dict[str, TypeAdapter[Any]] = {
    "num_hidden_layers": TypeAdapter(_Dim),
    "num_attention_heads": TypeAdapter(_Dim),
    "num_key_value_heads": TypeAdapter(_Dim),
    "head_dim": TypeAdapter(_Dim),
    "hidden_size": TypeAdapter(_Dim),
    "kv_lora_rank": TypeAdapter(_Dim | None),
    "sliding_window": TypeAdapter(_Count | None),
    "layer_types": TypeAdapter(Annotated[list[StrictStr], Field(max_length=1 << 16)] | None),
    "attn_type_list": TypeAdapter(Annotated[list[Any], Field(max_length=1 << 16)] | None),
}
_SINGLE: dict[str, TypeAdapter[Any]] = {
    "architectures": TypeAdapter(Annotated[list[_Name], Field(min_length=1, max_length=64)]),
    "model_type": TypeAdapter(_Name),
    "torch_dtype": TypeAdapter(Annotated[StrictStr, Field(max_length=64)] | None),
    "dtype": TypeAdapter(Annotated[StrictStr, Field(max_length=64)] | None),
    "auto_map": TypeAdapter(dict[str, Any] | None),
    "quantization_config": TypeAdapter(dict[str, Any] | None),
    "text_config": TypeAdapter(dict[str, Any] | None),
}


def _bad(adapter: TypeAdapter, value: Any) -> str | None:
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        return str(first.get("msg", "invalid"))
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _clean_level(config: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    out = dict(config)
    for group in (_POSITIONS, _LAYOUT):
        bad = [
            f"{where}{key}={_shown(config[key])} ({why})"
            for key, adapter in group.items()
            if key in config and (why := _bad(adapter, config[key])) is not None
        ]
        if bad:
            problems.extend(bad)
            for key in group:
                out.pop(key, None)
    for key, adapter in _SINGLE.items():
        if key in config and (why := _bad(adapter, config[key])) is not None:
            problems.append(f"{where}{key}={_shown(config[key])} ({why})")
            out.pop(key, None)
    quant = out.get("quantization_config")
    if isinstance(quant, dict) and not isinstance(quant.get("quant_method", ""), str):
        problems.append(f"{where}quantization_config.quant_method is not a string")
        out.pop("quantization_config")
    return out


def clean_config(config: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """``config.json`` with every value the pre-flight reads checked: an implausible one
    (NaN, infinity, a string, a list, a negative or absurd number) is dropped with the
    values that depend on it, and named in the problems returned."""
    if not isinstance(config, dict):
        return None, (["config.json is not a JSON object"] if config is not None else [])
    problems: list[str] = []
    cleaned = _clean_level(config, "", problems)
    inner = cleaned.get("text_config")
    if isinstance(inner, dict):
        cleaned["text_config"] = _clean_level(inner, "text_config.", problems)
    return cleaned, problems


class _Sibling(BaseModel):
    rfilename: Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]
    size: Annotated[StrictInt, Field(ge=0, le=MAX_FILE_BYTES)] | None = None


class _Safetensors(BaseModel):
    parameters: (
        Annotated[
            dict[
                Annotated[StrictStr, Field(max_length=32)],
                Annotated[StrictInt, Field(ge=0, le=MAX_PARAMETERS)],
            ],
            Field(max_length=64),
        ]
        | None
    ) = None


class HubListing(BaseModel):
    """The part of the hub's model info the pre-flight reads; anything else is ignored."""

    sha: Annotated[StrictStr, Field(min_length=1, max_length=128)] | None = None
    gated: bool | StrictStr | None = None
    siblings: Annotated[list[_Sibling], Field(max_length=MAX_FILES)] = []
    safetensors: _Safetensors | None = None


def check_listing(data: Any) -> HubListing:
    """The hub's model info against the schema; raises ValueError naming the first bad value."""
    try:
        listing = HubListing.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"{where or 'model info'}: {first.get('msg', 'invalid')}") from None
    total = sum(s.size or 0 for s in listing.siblings)
    if total > MAX_TOTAL_BYTES:
        raise ValueError(f"siblings: {total} bytes in all is not a plausible model")
    params = listing.safetensors.parameters if listing.safetensors else None
    if params and sum(params.values()) > MAX_PARAMETERS:
        raise ValueError("safetensors.parameters: not a plausible parameter count")
    return listing


def check_index(data: Any) -> frozenset[str] | None:
    """The weight files a safetensors index names; None when it is not a plausible one."""
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        return None
    names = set()
    for value in weight_map.values():
        if (
            not isinstance(value, str)
            or not value
            or len(value) > MAX_NAME
            or value.startswith("/")
            or ".." in value.split("/")
        ):
            return None
        names.add(value)
    return frozenset(names)


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
        """vLLM's choice of weight files (DefaultModelLoader._prepare_weights and
        download_weights_from_hf); None for a load format not modelled here or an index
        that could not be read."""
        files = {p: s for p, s in self.files.items() if not p.startswith(IGNORED_PREFIXES)}
        top = [p for p in files if "/" not in p]
        fmt = (load_format or "auto").lower()
        index_name = SAFE_INDEX
        if fmt == "auto":
            mistral = any(
                fnmatch.fnmatch(p.rsplit("/", 1)[-1], "consolidated*.safetensors")
                for p in self.files
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
        if self.local:
            available = files
        else:
            fetch: str | frozenset[str] | None = None
            if "*.safetensors" in patterns and SAFE_INDEX in top:
                names = self.indexes.get(SAFE_INDEX)
                if names is None:
                    return None
                fetch = names or "*.safetensors"
            else:
                fetch = next((p for p in patterns if fnmatch.filter(top, p)), None)
            if fetch is None:
                return WeightPlan(fmt, {}, self._small())
            available = {p: s for p, s in files.items() if _matches(p, fetch)}
        loaded: dict[str, int] = {}
        for pattern in patterns:
            loaded = {
                p: s for p, s in available.items() if "/" not in p and fnmatch.fnmatch(p, pattern)
            }
            if loaded:
                break
        if loaded and next(iter(loaded)).endswith(".safetensors") and index_name in top:
            names = self.indexes.get(index_name)
            if names is None:
                return None
            loaded = {p: s for p, s in loaded.items() if p in names}
        return WeightPlan(fmt, loaded, {**self._small(), **available})

    def _small(self) -> dict[str, int]:
        return {p: s for p, s in self.files.items() if "/" not in p and p.endswith(SMALL_SUFFIXES)}

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
