"""The model's config.json against the installed vLLM and the requested options. Pure.

Each check returns a ``Prediction`` only when vLLM would fail for sure; anything
uncertain (nested rope settings, an unknown quantization, a model type that may load
through custom code) returns None and the launch goes ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worker.preflight.prediction import Prediction
from worker.preflight.request import Request

# vLLM's keys for the model's positions, in its order (ModelArchConfigConvertor).
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# Rope types whose factor vLLM does not apply to the positions.
_UNSCALED_ROPE = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}


@dataclass(frozen=True)
class Registry:
    """What the installed vLLM can load (worker/preflight/vllm_models.json)."""

    vllm_version: str
    build: str
    architectures: frozenset[str]
    config_model_types: frozenset[str]
    transformers_architectures: frozenset[str]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Registry:
        return cls(
            vllm_version=str(data["vllm_version"]),
            build=str(data["build"]),
            architectures=frozenset(data["architectures"]),
            config_model_types=frozenset(data["config_model_types"]),
            transformers_architectures=frozenset(data["transformers_architectures"]),
        )


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config (multimodal configs nest it)."""
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def has_remote_code(config: Mapping[str, Any]) -> bool:
    auto_map = config.get("auto_map")
    return isinstance(auto_map, Mapping) and bool(auto_map)


def check_remote_code(config: Mapping[str, Any], req: Request, reg: Registry) -> Prediction | None:
    """Custom code that transformers would have to run, without TRUST_REMOTE_CODE."""
    if req.trust_remote_code or not has_remote_code(config):
        return None
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type in reg.config_model_types:
        return None  # a config class exists without the repo's code: it loads
    return Prediction(
        "remote-code-required",
        detail=f"Its config.json has model_type {model_type!r}, which only the repository's "
        "own code (auto_map) defines.",
    )


def check_architecture(config: Mapping[str, Any], req: Request, reg: Registry) -> Prediction | None:
    """An architecture neither vLLM nor its Transformers backend can load."""
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        return None
    if has_remote_code(config):
        return None  # the repo's own code may provide it (Transformers backend)
    if any(a in reg.architectures or a in reg.transformers_architectures for a in archs):
        return None
    shown = ", ".join(archs)
    return Prediction(
        "architecture-not-supported",
        {"arch": shown},
        detail=f"vLLM {reg.vllm_version} has no implementation of it and transformers "
        "does not know it.",
    )


def derived_max_len(config: Mapping[str, Any]) -> tuple[int, str] | None:
    """vLLM's derived maximum length and the key it came from; None when unsure."""
    text = text_config(config)
    found: tuple[float, str] | None = None
    for key in _POSITION_KEYS:
        value = text.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if found is None or value < found[0]:
            found = (float(value), key)
    if isinstance(text.get("model_max_length"), int | float) and text["model_max_length"]:
        found = (float(text["model_max_length"]), "model_max_length")
    if found is None:
        return None
    limit, key = found
    rope = text.get("rope_parameters") or text.get("rope_scaling") or config.get("rope_scaling")
    if rope:
        if not isinstance(rope, Mapping) or any(isinstance(v, Mapping) for v in rope.values()):
            return None  # per-layer rope settings: leave it to vLLM
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        model_type = str(config.get("model_type", ""))
        if rope_type not in _UNSCALED_ROPE and "gemma3" not in model_type:
            factor = rope.get("factor", 1.0)
            if not isinstance(factor, int | float):
                return None
            limit *= factor
    return int(limit), key


def check_max_model_len(
    config: Mapping[str, Any], req: Request, env: Mapping[str, str]
) -> Prediction | None:
    """MAX_MODEL_LEN above the model's positions (vLLM: 'User-specified max_model_len')."""
    if req.max_model_len is None:
        return None
    if env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").strip().lower() in ("1", "true"):
        return None
    derived = derived_max_len(config)
    if derived is None:
        return None
    limit, key = derived
    if req.max_model_len <= limit:
        return None
    return Prediction(
        "max-model-len-above-model-limit",
        {"requested": str(req.max_model_len), "limit": str(limit)},
        detail=f"(config.json: {key}={limit}).",
    )


def check_heads(config: Mapping[str, Any], req: Request) -> Prediction | None:
    """Attention heads (and KV heads) must divide by TENSOR_PARALLEL_SIZE."""
    tp = req.tensor_parallel_size
    if tp <= 1:
        return None
    heads = text_config(config).get("num_attention_heads")
    if isinstance(heads, int) and heads > 0 and heads % tp:
        return Prediction(
            "tensor-parallel-gpu-count",
            {"heads": str(heads), "tp": str(tp)},
            detail=f"The model has {heads} attention heads, which TENSOR_PARALLEL_SIZE={tp} "
            "does not divide.",
        )
    return None


def check_quantization(config: Mapping[str, Any], req: Request) -> Prediction | None:
    """QUANTIZATION naming a different method than the checkpoint's own."""
    wanted = (req.quantization or "").lower()
    quant = text_config(config).get("quantization_config") or config.get("quantization_config")
    if not wanted or not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if not method or wanted == method:
        return None
    # vLLM's kernels may override a checkpoint's method (gptq -> gptq_marlin, awq ->
    # awq_marlin, ...): only methods that share no family name are a sure conflict.
    if method in wanted or wanted in method or method.split("_")[0] in wanted:
        return None
    return Prediction(
        "conflicting-options",
        {"a": method, "b": wanted},
        detail=f"QUANTIZATION={req.quantization} but the checkpoint is quantized with "
        f"{method!r} (config.json quantization_config).",
    )


def check_dtype(req: Request, capability: tuple[int, int] | None) -> Prediction | None:
    """DTYPE=bfloat16 on a GPU without it (compute capability below 8.0)."""
    if req.dtype not in ("bfloat16", "bf16") or capability is None or capability >= (8, 0):
        return None
    cc = f"{capability[0]}.{capability[1]}"
    return Prediction(
        "gpu-capability-requirement",
        detail=f"DTYPE={req.dtype} needs compute capability 8.0 or higher; this GPU has {cc}.",
    )


def check_config(
    config: Mapping[str, Any],
    req: Request,
    reg: Registry,
    env: Mapping[str, str],
) -> Prediction | None:
    """The first sure failure, in the order vLLM meets them."""
    for check in (
        lambda: check_remote_code(config, req, reg),
        lambda: check_architecture(config, req, reg),
        lambda: check_max_model_len(config, req, env),
        lambda: check_heads(config, req),
        lambda: check_quantization(config, req),
    ):
        found = check()
        if found is not None:
            return found
    return None
