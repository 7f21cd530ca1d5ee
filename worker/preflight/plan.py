"""What the worker says it expects of a start: the calibrated numbers, and numbers in
units that do not round away.

The conservative pre-flight (``fit``) stays the rule for stopping a launch; the numbers
the worker states (the ``preflight.estimate`` event, the first job's metadata) are the
calibrated estimator's (``worker.preflight.estimate.estimate``) when it is installed,
else the conservative ones. ``estimator_row`` builds the estimator's input, a row in the
fit-truth table's field names, from what the pre-flight already read: config.json, the
weights' sizes, the GPU's total memory from NVML (host memory on vLLM's CPU build) and
the arguments. Pure apart from importing the estimator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from worker.memory.alternatives import options_sentence
from worker.modelinfo.facts import ModelFacts
from worker.preflight import fit
from worker.preflight.estimate import estimate
from worker.preflight.prediction import Prediction
from worker.preflight.request import Request
from worker.seams.gpus import GIB, Inventory

MIB = 1 << 20
# What the estimate's alternatives keep for the answer (worker.memory.alternatives).
ALTERNATIVES = (
    "max_model_len", "kv_tokens", "largest_max_model_len", "smallest_tensor_parallel_size",
    "tp_kv_tokens", "tp_fp8_kv_tokens", "fp8_kv_tokens", "fp8_max_model_len",
    "gpu_sizes_that_fit", "platform",
)  # fmt: skip
# Predictions that a model does not fit, which the alternatives complete.
DOES_NOT_FIT = (
    "kv-cache-too-small-for-max-len", "kv-cache-max-len-above-capacity", "kv-cache-no-memory",
    "cuda-oom", "cuda-oom-allocate", "host-memory-exhausted",
)  # fmt: skip
# Rules whose fix already gives the length that fits.
GIVES_LENGTH = ("kv-cache-too-small-for-max-len", "kv-cache-max-len-above-capacity")
Estimator = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def estimator_row(
    facts: ModelFacts,
    req: Request,
    inv: Inventory,
    build: str,
    vllm_version: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The estimator's input row; None without config.json or the machine's memory."""
    if not facts.config:
        return None
    budget = fit.budget_of(inv, req, build)
    if not isinstance(budget, fit.Budget):
        return None
    row: dict[str, Any] = {
        "config": facts.config,
        "gpu": {
            "name": budget.name,
            "total_memory_gib_printed": round(budget.device_total / GIB, 2),
        },
        "gpu_memory_utilization": req.gpu_memory_utilization,
        "tensor_parallel_size": req.tensor_parallel_size,
        "pipeline_parallel_size": req.pipeline_parallel_size,
        "dtype": req.dtype,
        "kv_cache_dtype": req.kv_cache_dtype,
        "max_model_len": req.max_model_len,
        "kv_cache_memory_bytes": req.kv_cache_memory_bytes,
        "quantization": req.quantization,
        "safetensors_parameters": facts.parameters,
        "weights_file_bytes": facts.weight_bytes,
    }
    if vllm_version:
        row["vllm_version"] = vllm_version
    if budget.platform == "cpu":
        row["engine"] = "cpu"
    row.update(extra or {})
    return {k: v for k, v in row.items() if v is not None}


def conservative(
    facts: ModelFacts, req: Request, inv: Inventory, build: str, model_len: int | None
) -> dict[str, Any] | None:
    """The conservative count's numbers (``fit``): weights, KV-cache tokens, the
    largest length that fits. None when the memory or the weights are unknown."""
    budget = fit.budget_of(inv, req, build)
    weights = fit.weight_bytes(facts, req)
    if not isinstance(budget, fit.Budget) or weights is None:
        return None
    per_device = weights // budget.devices
    found: dict[str, Any] = {
        "weights_gib": round(weights / GIB, 3),
        "weights_fit": per_device <= budget.budget * fit.MARGIN,
    }
    per_token = fit.kv_bytes_per_token(facts.config or {}, req) if facts.config else None
    if per_token:
        available = (
            req.kv_cache_memory_bytes
            if req.kv_cache_memory_bytes is not None
            else budget.budget - per_device
        )
        tokens, longest = fit.kv_fit(available, per_token, budget.platform)
        found["kv_cache_tokens"] = tokens
        found["max_model_len_fit"] = min(longest, model_len) if model_len else longest
    return found


def plan(
    facts: ModelFacts,
    req: Request,
    inv: Inventory,
    build: str,
    model_len: int | None,
    *,
    vllm_version: str | None = None,
    estimator: Estimator | None = None,
) -> dict[str, Any] | None:
    """The numbers the worker states for this start: the calibrated estimate's when the
    estimator gives them, else the conservative count's; with the concurrency at the
    configured length and whether the weights fit (always the conservative judgement).
    ``model_len``: the model's own limit."""
    base = conservative(facts, req, inv, build, model_len)
    estimator = estimator if estimator is not None else estimate
    numbers: dict[str, Any] | None = None
    row = estimator_row(facts, req, inv, build, vllm_version)
    if row is not None:
        try:
            got = estimator(row)
        except Exception as exc:  # an estimate is a statement, never a reason to stop
            numbers = {"estimate_error": str(exc)[:200]}
        else:
            keep = ("weights_gib", "kv_cache_tokens", "max_model_len_fit")
            numbers = {k: got[k] for k in keep if k in got}
            if numbers:
                numbers["source"] = "calibrated"
            found = got.get("alternatives")
            if isinstance(found, Mapping):
                numbers["alternatives"] = {k: found[k] for k in ALTERNATIVES if k in found}
    if not numbers or "weights_gib" not in numbers:
        if base is None:
            return numbers or None
        numbers = {**(numbers or {}), **base, "source": "conservative"}
    elif base is not None:
        numbers["weights_fit"] = base["weights_fit"]
    fit_len = numbers.get("max_model_len_fit")
    if isinstance(fit_len, int | float) and model_len:
        numbers["max_model_len_fit"] = int(min(fit_len, model_len))
    length = req.max_model_len or (None if req.max_model_len_auto else model_len)
    numbers["max_model_len"] = length
    tokens = numbers.get("kv_cache_tokens")
    if length and isinstance(tokens, int | float):
        numbers["concurrency"] = round(tokens / length, 2)
    return numbers


def amount(size: float) -> str:
    """Bytes in GiB, or in MiB (or KiB) when GiB would round to 0.00."""
    if abs(size) >= 0.005 * GIB:
        return f"{size / GIB:.2f} GiB"
    if abs(size) >= 0.01 * MIB:
        return f"{size / MIB:.2f} MiB"
    return f"{size / 1024:.2f} KiB"


def kv_room(
    facts: ModelFacts, req: Request, inv: Inventory, build: str
) -> tuple[int | None, int | None]:
    """(KV-cache bytes per token, bytes available for the KV cache), as ``fit`` counts."""
    budget = fit.budget_of(inv, req, build)
    weights = fit.weight_bytes(facts, req)
    per_token = fit.kv_bytes_per_token(facts.config or {}, req) if facts.config else None
    if req.kv_cache_memory_bytes is not None:
        return per_token, req.kv_cache_memory_bytes
    if not isinstance(budget, fit.Budget) or weights is None:
        return per_token, None
    return per_token, budget.budget - weights // budget.devices


def readable(
    pred: Prediction, facts: ModelFacts, req: Request, inv: Inventory, build: str
) -> Prediction:
    """A KV-cache prediction whose GiB round to 0.00 said in exact GiB digits, with MiB
    and tokens in its detail (the rule's wording keeps its unit)."""
    values = pred.values
    if pred.rule != "kv-cache-too-small-for-max-len":
        return pred
    per_token, available = kv_room(facts, req, inv, build)
    length = int(values.get("len", "0") or 0)
    if not per_token or available is None or not length:
        return pred
    need = per_token * length
    if need >= 0.005 * GIB and available >= 0.005 * GIB:
        return pred
    detail = pred.detail
    weights = fit.weight_bytes(facts, req)
    budget = fit.budget_of(inv, req, build)
    platform = budget.platform if isinstance(budget, fit.Budget) else "gpu"
    held = fit.kv_fit(available, per_token, platform)[0]
    if weights is not None and isinstance(budget, fit.Budget):
        detail = detail.replace(" take 0.00 GiB ", f" take {amount(weights // budget.devices)} ")
    return replace(
        pred,
        values={**values, "need": f"{need / GIB:.6f}", "avail": f"{available / GIB:.6f}"},
        detail=f"{length} tokens need {amount(need)} of KV cache ({per_token} bytes per "
        f"token); {amount(available)} is available, which holds {held} tokens. {detail}",
    )


def advice(
    numbers: Mapping[str, Any] | None, rule: str | None, category: str | None = None
) -> str | None:
    """The sentence on what would fit, from the estimate's alternatives (``numbers``: what
    ``plan`` returned), for a failure of ``rule`` (or of a kv_cache / oom ``category``,
    as vLLM reports them); None for another failure, or when the estimate found the
    model to fit (it gives alternatives only when it does not)."""
    found = (numbers or {}).get("alternatives")
    wanted = rule in DOES_NOT_FIT or category in ("kv_cache", "oom")
    if not wanted or not isinstance(found, Mapping):
        return None
    return options_sentence(found, with_length=rule not in GIVES_LENGTH)


def with_alternatives(pred: Prediction, numbers: Mapping[str, Any] | None) -> Prediction:
    """A prediction that the model does not fit, completed with what would (the sentence
    after what was measured), its length the estimate's when that is shorter: the
    conservative count ignores the activations, so its length is only an upper bound."""
    sentence = advice(numbers, pred.rule)
    if sentence is None:
        return pred
    values = pred.values
    best = (numbers or {}).get("alternatives", {}).get("largest_max_model_len")
    said = values.get("fit", "")
    if isinstance(best, int) and best > 0 and said.isdigit() and best < int(said):
        values = {**values, "fit": str(best)}
    return replace(pred, values=values, detail=f"{pred.detail} {sentence}".strip())


def answer(
    pred: Prediction,
    facts: ModelFacts,
    req: Request,
    inv: Inventory,
    build: str,
    numbers: Mapping[str, Any] | None,
) -> Prediction:
    """The fit's prediction as the pre-flight answers it: ``readable``, then
    ``with_alternatives``."""
    return with_alternatives(readable(pred, facts, req, inv, build), numbers)
