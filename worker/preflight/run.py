"""The pre-flight: predict a failed start before vLLM is spawned.

``run_preflight`` reads what is cheap to read (the RunPod SDK's host checks, the hub's
metadata or the local model folder, config.json, the GPUs, the disk), and returns a
``Diagnosis`` only for a definite answer: a refusal of the hub (401/403/404, a missing
revision), a model this vLLM cannot load, options the model rules out, weights or a KV
cache that cannot fit, a disk that cannot hold the download, a host that fails the SDK's
checks. Anything uncertain (a slow, failing, oversized or implausible hub answer, no
NVML, a layout not modelled) is a finding and the launch goes ahead. The hub's answers
have a total deadline (``timeout``), NVML has one too (a wedged driver is a host fault),
and every text repeated from outside passes through the secret rule
(``diagnostics.redaction``): the exact values of HF_TOKEN and of HF_ENDPOINT's
credentials included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diagnostics import Category, Diagnosis, RulePack
from diagnostics.redaction.redact import Redactor
from diagnostics.redaction.secrets import secret_values
from worker.config.config_file import read_config_file
from worker.config.errors import ConfigError
from worker.modelinfo import hub, local
from worker.modelinfo.facts import ModelFacts
from worker.preflight import checks, disk, fit, host, plan
from worker.preflight.checks import Registry
from worker.preflight.prediction import Prediction
from worker.preflight.registry import load_registry
from worker.preflight.request import Request, config_file_of, read_request
from worker.preflight.wording import diagnose, host_fault, hub_prediction, nvml_fault
from worker.seams.gpus import GIB, Inventory, read_inventory

_TRUE = ("1", "true", "yes", "on")
# A download larger than this is not a plausible model: no disk-full verdict for it.
MAX_PLAUSIBLE_DOWNLOAD = 1 << 45  # 32 TiB


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
    plan: dict[str, Any] | None = None  # the numbers the worker states (preflight.plan)

    def summary(self) -> dict[str, Any]:
        """Fields for the log event and the cold-start summary."""
        return {
            "preflight_s": round(self.elapsed_s, 3),
            "preflight_verdict": self.diagnosis.rule if self.diagnosis else "go",
            "preflight_findings": [f.to_dict() for f in self.findings],
        }


class _Steps:
    def __init__(self, clock: Callable[[], float], redact: Callable[[str], str] = str):
        self.clock = clock
        self.redact = redact
        self.findings: list[Finding] = []
        self._mark = clock()
        self.plan: dict[str, Any] | None = None

    def note(self, step: str, outcome: str, detail: str) -> None:
        now = self.clock()
        ms = round((now - self._mark) * 1000, 1)
        self.findings.append(Finding(step, outcome, self.redact(detail), ms))
        self._mark = now


def redactor_for(env: Mapping[str, str]) -> Redactor:
    """The secret rule with this environment's values: HF_TOKEN (and any other secret
    variable) and the credentials in HF_ENDPOINT (as written, decoded and as basic auth
    sends them), found wherever a hub repeats them."""
    return Redactor(secret_values(env))


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _token(env: Mapping[str, str]) -> str | None:
    return env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None


def _config_values(path: str | None) -> dict[str, Any]:
    """The scalar values of the --config file, read with VLLM_CONFIG_FILE's checks (a
    regular file, bounded, no YAML aliases): the mapping the settings read, when they did.
    Raises ConfigError when the file cannot be read that way."""
    if not path:
        return {}
    data = read_config_file("--config", path)
    return {k: v for k, v in data.items() if isinstance(v, str | int | float | bool)}


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


def _stated(
    facts: ModelFacts, req: Request, inv: Inventory, build: str, model_len: int | None
) -> dict[str, Any] | None:
    """The numbers the worker states (``plan``); a failure there never stops a launch."""
    try:
        from worker.config.snapshot import load_flags

        return plan.plan(facts, req, inv, build, model_len, vllm_version=load_flags().vllm_version)
    except Exception as exc:
        return {"plan_error": str(exc)[:200]}


def run_preflight(
    settings: Any,
    env: Mapping[str, str],
    *,
    pack: RulePack,
    timeout: float = 10.0,
    cache_dir: Path | None = None,
    sdk_checks: bool | None = None,
    inventory: Callable[[], Inventory] | None = None,
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
    redact = redactor_for(env)
    steps = _Steps(clock, redact)

    def result(diagnosis: Diagnosis | None) -> PreflightResult:
        return PreflightResult(diagnosis, steps.findings, clock() - started, steps.plan)

    def predicted(pred: Prediction, step: str) -> PreflightResult:
        pred = replace(
            pred, values={k: redact(v) for k, v in pred.values.items()}, detail=redact(pred.detail)
        )
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
            error = redact(f.error)
            steps.note("host", "failed", f"{f.check}: {error}")
            return result(host_fault(f.check, error, Category(f.category)))
        steps.note(
            "host",
            "ok",
            f"passed: {', '.join(report.passed) or 'none registered'}"
            + (f"; no answer: {', '.join(report.timed_out)}" if report.timed_out else ""),
        )

    # 2. What is asked of vLLM.
    args = list(settings.vllm_args)
    try:
        req = read_request(args, settings.model, _config_values(config_file_of(args)))
    except ConfigError as exc:
        steps.note("request", "unknown", f"cannot read the --config file ({exc}); vLLM decides")
        return result(None)
    except ValueError as exc:
        steps.note("request", "unknown", f"cannot read the arguments ({exc}); vLLM decides")
        return result(None)
    registry = registry or load_registry()
    cache = cache_dir or hf_cache_dir(dict(env))

    # 3. The model: hub metadata, or its folder.
    facts = read_facts(settings, req, env, cache, timeout)
    if isinstance(facts, hub.HubRefusal):
        return predicted(hub_prediction(facts, req), "model")
    if isinstance(facts, hub.HubUnknown):
        steps.note("model", "unknown", f"hub gave no answer ({facts.detail}); vLLM decides")
        facts = None
    elif facts is None:
        steps.note("model", "unknown", "model files not readable here (offline, not cached)")
    else:
        weights = facts.weight_bytes_for(req.load_format)
        shown = (
            f"{weights / GIB:.2f} GiB of weights"
            if weights is not None
            else "weights not known (none listed, a load format or index not read)"
        )
        steps.note("model", "ok", f"{facts.source}: {len(facts.files)} files, {shown}")
        if facts.problems:
            dropped = "; ".join(facts.problems[:5])
            steps.note("model", "unknown", f"not judged, implausible or unreadable: {dropped}")
    config = facts.config if facts else None

    # 4. The model against this vLLM and the options.
    if config is not None:
        pred = checks.check_config(config, req, registry, env)
        if pred is not None:
            return predicted(pred, "config")
        steps.note("config", "ok", f"architectures {config.get('architectures')}")

    # 5. The fit on this machine's GPUs (or host memory on vLLM's CPU build).
    inv = inventory() if inventory is not None else read_inventory(env=env)
    if inv.nvml_hung:
        error = inv.error or "NVML did not answer"
        steps.note("fit", "failed", error)
        return result(nvml_fault(error))
    pred = checks.check_dtype(req, inv.min_capability)
    if pred is not None:
        return predicted(pred, "fit")
    if facts is not None:
        derived = checks.derived_max_len(config) if config else None
        model_len = derived[0] if derived else None
        # MAX_MODEL_LEN=auto asks for whatever fits: only "nothing fits" stops it.
        max_len = req.max_model_len or (fit.BLOCK if req.max_model_len_auto else model_len)
        pred = fit.check_fit(facts, req, inv, registry.build, max_len)
        steps.plan = _stated(facts, req, inv, registry.build, model_len)
        if pred is not None:
            return predicted(plan.answer(pred, facts, req, inv, registry.build, steps.plan), "fit")
    where = f"{inv.count} GPU(s)" if inv.count else (inv.error or "no GPU")
    steps.note("fit", "ok" if facts else "skipped", where)

    # 6. The disk the download goes to.
    fetched = facts.download_files(req.load_format) if facts is not None else None
    if facts is not None and not facts.local and fetched is None:
        steps.note("disk", "unknown", f"which files vLLM fetches is not known ({req.load_format})")
    elif facts is not None and not facts.local and fetched is not None:
        cached = _cached_bytes(cache, req)
        need = sum(size for path, size in fetched.items() if cached.get(path) != size)
        if need > MAX_PLAUSIBLE_DOWNLOAD:
            steps.note("disk", "unknown", f"{need / GIB:.2f} GiB is not a plausible download")
            return result(None)
        pred = disk.check_disk(cache, need, disk.free_bytes(cache))
        if pred is not None:
            return predicted(pred, "disk")
        steps.note("disk", "ok", f"{need / GIB:.2f} GiB to download into {cache}")
    return result(None)
