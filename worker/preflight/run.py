"""The pre-flight: predict a failed start before vLLM is spawned.

``run_preflight`` reads what is cheap to read (the RunPod SDK's host checks, the hub's
metadata or the local model folder, config.json, the GPUs, the disk), and returns a
``Diagnosis`` only for a definite answer: a refusal of the hub (401/403/404, a missing
revision), a model this vLLM cannot load, options the model rules out, weights or a KV
cache that cannot fit, a disk that cannot hold the download, a host that fails the SDK's
checks. Anything uncertain (a slow or failing hub, no NVML, a layout not modelled) is a
finding and the launch goes ahead. Every network call has a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from diagnostics import Category, Diagnosis, RulePack
from worker.modelinfo import hub, local
from worker.modelinfo.facts import ModelFacts
from worker.preflight import checks, disk, fit, host
from worker.preflight.checks import Registry
from worker.preflight.prediction import Prediction
from worker.preflight.registry import load_registry
from worker.preflight.request import Request, config_file_of, read_request
from worker.preflight.wording import diagnose, host_fault
from worker.seams.gpus import GIB, Inventory, read_inventory

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Finding:
    step: str  # host, request, model, config, fit, disk
    outcome: str  # ok, failed, skipped, unknown
    detail: str
    ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "outcome": self.outcome, "detail": self.detail, "ms": self.ms}


@dataclass
class PreflightResult:
    diagnosis: Diagnosis | None
    findings: list[Finding] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        """Fields for the log event and the cold-start summary."""
        return {
            "preflight_s": round(self.elapsed_s, 3),
            "preflight_verdict": self.diagnosis.rule if self.diagnosis else "go",
            "preflight_findings": [f.to_dict() for f in self.findings],
        }


class _Steps:
    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.findings: list[Finding] = []
        self._mark = clock()

    def note(self, step: str, outcome: str, detail: str) -> None:
        now = self.clock()
        self.findings.append(Finding(step, outcome, detail, round((now - self._mark) * 1000, 1)))
        self._mark = now


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _token(env: Mapping[str, str]) -> str | None:
    return env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None


def _yaml_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _hub_prediction(refusal: hub.HubRefusal, req: Request) -> Prediction:
    model = req.model
    if refusal.kind == "gated":
        return Prediction(
            "gated-repo", {"repo": model}, detail=f"The hub answered: {refusal.detail.rstrip('.')}."
        )
    if refusal.kind == "revision-not-found":
        return Prediction(
            "repo-not-found",
            {"model": f"{model}@{req.revision}", "rev": str(req.revision)},
            detail=f"The hub has no revision {req.revision!r} of {model}.",
        )
    where = "" if refusal.detail.startswith("no folder") else "The hub answered: "
    return Prediction(
        "repo-not-found", {"model": model}, detail=f"{where}{refusal.detail.rstrip('.')}."
    )


def read_facts(
    settings: Any,
    req: Request,
    env: Mapping[str, str],
    cache_dir: Path,
    timeout: float,
) -> ModelFacts | hub.HubRefusal | hub.HubUnknown | None:
    """The model's files and config: from its folder, the cache (offline) or the hub."""
    baked = getattr(settings, "baked_model_path", None)
    path = Path(baked) if baked else Path(req.model)
    if baked or path.is_absolute() or path.exists():
        if not baked and not path.exists():  # not a repo id either: vLLM cannot load it
            return hub.HubRefusal("repo-not-found", f"no folder {path} in the container")
        return local.read_folder(path)
    if getattr(settings, "offline", False) or _is_true(env.get("HF_HUB_OFFLINE")):
        snapshot = local.cached_snapshot(cache_dir, req.model, req.revision)
        return local.read_folder(snapshot, "cache") if snapshot else None
    return hub.read_hub(
        req.model,
        req.revision,
        endpoint=env.get("HF_ENDPOINT"),
        token=_token(env),
        timeout=timeout,
    )


def _cached_bytes(cache_dir: Path, req: Request) -> dict[str, int]:
    snapshot = local.cached_snapshot(cache_dir, req.model, req.revision)
    if snapshot is None:
        return {}
    found = local.read_folder(snapshot, "cache")
    return found.files if found else {}


def run_preflight(
    settings: Any,
    env: Mapping[str, str],
    *,
    pack: RulePack,
    timeout: float = 10.0,
    cache_dir: Path | None = None,
    sdk_checks: bool | None = None,
    inventory: Callable[[], Inventory] = read_inventory,
    registry: Registry | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PreflightResult:
    """Judge the start before vLLM is spawned; see the module docstring.

    ``settings`` needs ``model``, ``vllm_args`` and optionally ``baked_model_path`` and
    ``offline``; ``sdk_checks`` defaults to "when the SDK would run them" (its job loop,
    RUNPOD_WEBHOOK_GET_JOB set); ``cache_dir`` is where vLLM will download to.
    """
    from worker.seams.downloads import hf_cache_dir

    started = clock()
    steps = _Steps(clock)

    def result(diagnosis: Diagnosis | None) -> PreflightResult:
        return PreflightResult(diagnosis, steps.findings, clock() - started)

    def predicted(pred: Prediction, step: str) -> PreflightResult:
        diagnosis = diagnose(pack, pred.rule, pred.values, pred.detail)
        steps.note(step, "failed", f"{pred.rule}: {pred.detail}")
        return result(diagnosis)

    # 1. The host, with the RunPod SDK's own fitness checks.
    if sdk_checks is None:
        sdk_checks = bool(getattr(settings, "job_queue", False))  # a queue worker's SDK runs them
    if sdk_checks:
        report = host.run_checks(host.take_sdk_checks(), max(timeout, 35.0))
        if report.failure is not None:
            f = report.failure
            steps.note("host", "failed", f"{f.check}: {f.error}")
            return result(host_fault(f.check, f.error, Category(f.category)))
        steps.note(
            "host",
            "ok",
            f"passed: {', '.join(report.passed) or 'none registered'}"
            + (f"; no answer: {', '.join(report.timed_out)}" if report.timed_out else ""),
        )

    # 2. What is asked of vLLM.
    args = list(settings.vllm_args)
    try:
        req = read_request(args, settings.model, _yaml_config(config_file_of(args)))
    except ValueError as exc:
        steps.note("request", "unknown", f"cannot read the arguments ({exc}); vLLM decides")
        return result(None)
    registry = registry or load_registry()
    cache = cache_dir or hf_cache_dir(dict(env))

    # 3. The model: hub metadata, or its folder.
    facts = read_facts(settings, req, env, cache, timeout)
    if isinstance(facts, hub.HubRefusal):
        return predicted(_hub_prediction(facts, req), "model")
    if isinstance(facts, hub.HubUnknown):
        steps.note("model", "unknown", f"hub gave no answer ({facts.detail}); vLLM decides")
        facts = None
    elif facts is None:
        steps.note("model", "unknown", "model files not readable here (offline, not cached)")
    else:
        weights = facts.weight_bytes
        shown = (
            f"{weights / GIB:.2f} GiB of weights" if weights is not None else "no weights listed"
        )
        steps.note("model", "ok", f"{facts.source}: {len(facts.files)} files, {shown}")
    config = facts.config if facts else None

    # 4. The model against this vLLM and the options.
    if config is not None:
        pred = checks.check_config(config, req, registry, env)
        if pred is not None:
            return predicted(pred, "config")
        steps.note("config", "ok", f"architectures {config.get('architectures')}")

    # 5. The fit on this machine's GPUs (or host memory on vLLM's CPU build).
    inv = inventory()
    pred = checks.check_dtype(req, inv.min_capability)
    if pred is not None:
        return predicted(pred, "fit")
    if facts is not None:
        derived = checks.derived_max_len(config) if config else None
        max_len = req.max_model_len or (derived[0] if derived else None)
        pred = fit.check_fit(facts, req, inv, registry.build, max_len)
        if pred is not None:
            return predicted(pred, "fit")
    where = f"{inv.count} GPU(s)" if inv.count else (inv.error or "no GPU")
    steps.note("fit", "ok" if facts else "skipped", where)

    # 6. The disk the download goes to.
    if facts is not None and not facts.local:
        cached = _cached_bytes(cache, req)
        need = sum(
            size for path, size in facts.download_files().items() if cached.get(path) != size
        )
        pred = disk.check_disk(cache, need, disk.free_bytes(cache))
        if pred is not None:
            return predicted(pred, "disk")
        steps.note("disk", "ok", f"{need / GIB:.2f} GiB to download into {cache}")
    return result(None)
