"""The schema every value read about a model passes before any verdict reads it.

Everything here was written by someone else (a hub, a mirror, a model folder):
``config.json`` (``clean_config``), the hub's model info (``check_listing``) and a
safetensors index (``check_index``) are checked against a schema (pydantic, strict
types) and the plausible ranges below; an implausible value is dropped so that what
depends on it is "unknown", never a verdict.
"""

from __future__ import annotations

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
