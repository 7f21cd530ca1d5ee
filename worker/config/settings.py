"""The worker's settings: read once from the environment into one frozen ``Settings``.

``SETTINGS`` is the one table of the worker's own variables (name, default, parser, doc,
and the ``Settings`` field it fills). ``load_settings``, ``docs/configuration.md``
(``scripts/gen_config_docs.py``) and ``WORKER_ENV`` (the names never turned into vLLM
flags) are all derived from it. To add a setting: add a row here and a field to
``Settings``, then run ``python scripts/gen_config_docs.py``.

The final `vllm serve` argument list is built by ``worker.config.flags``; a baked model
(``worker.config.baked``) replaces the model variables first. Every bad value raises
``ConfigError`` naming the variable; nothing falls back silently.

Must not read ``os.environ`` itself or do anything at import: the composition root calls
``load_settings(os.environ)`` once and passes the result on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from worker.config import flags as flagmod
from worker.config import lb_parsers as lbp
from worker.config import parsers as p
from worker.config.baked import DEFAULT_MANIFEST, read_baked_model, with_baked_model
from worker.config.errors import ConfigError


class Setting(NamedTuple):
    """One of the worker's own environment variables."""

    name: str
    default: str  # as written in the environment; parsed like any value
    parse: p.Parser
    doc: str
    field: str | None  # the Settings field it fills; None: read by another module


# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting("VLLM_COMMAND", "vllm serve", p.command,
            "Command that starts vLLM; split like a shell would.", "vllm_command"),
    Setting("VLLM_PORT", "8000", p.port, "Port vLLM listens on at 127.0.0.1.", "vllm_port"),
    Setting("VLLM_STARTUP_TIMEOUT", "3600", p.seconds(allow_zero=False),
            "Seconds vLLM may take to become healthy, downloads included.",
            "startup_timeout_s"),
    Setting("VLLM_STALL_TIMEOUT", "600", p.seconds(allow_zero=False),
            "Seconds of start-up without any output from vLLM before it counts as stalled.",
            "stall_timeout_s"),
    Setting("VLLM_SHUTDOWN_GRACE", "10", p.seconds(allow_zero=True),
            "Seconds vLLM gets to exit after SIGTERM before SIGKILL.", "shutdown_grace_s"),
    Setting("MAX_CONCURRENCY", "30", p.integer(1),
            "Jobs one worker runs at the same time.", "max_concurrency"),
    Setting("REQUEST_TIMEOUT", "600", p.seconds(allow_zero=False),
            "Seconds one request to vLLM may take.", "request_timeout_s"),
    Setting("BASE_PATH", "/runpod-volume", p.folder_path,
            "Network volume mount; caches live under it.", "base_path"),
    Setting("TRANSIENT_ANSWER_TIMEOUT", "30", p.seconds(allow_zero=True),
            "Seconds a worker whose vLLM failed for a transient reason waits for a job to "
            "answer with the diagnosis before exiting.", "transient_answer_timeout_s"),
    Setting("BAKED_MODEL_MANIFEST", DEFAULT_MANIFEST, p.path,
            "JSON manifest of a model baked into the image; when present its local path is "
            "served instead of MODEL_NAME and the Hugging Face Hub is not contacted.", None),
    Setting("CRASH_LOOP_LIMIT", "3", p.integer(1),
            "Failed-transient starts of the same configuration within CRASH_LOOP_WINDOW "
            "after which the next failure is treated as permanent (the crash-loop breaker).",
            "crash_loop_limit"),
    Setting("CRASH_LOOP_WINDOW", "1800", p.seconds(allow_zero=False),
            "Seconds the crash-loop breaker looks back.", "crash_loop_window_s"),
    Setting("CRASH_LOOP_RESET", "false", p.parse_bool,
            "true: forget this configuration's recorded failures at start (or delete "
            "BASE_PATH/.vllm-worker/restart-ledger.json).", "crash_loop_reset"),
    Setting("CRASH_LOOP_LEDGER_DIR", "", p.optional_path_as_given,
            "Folder on the container disk for the crash-loop breaker's ledger when no "
            "network volume is mounted at BASE_PATH; kept across restarts of the same "
            "container. Empty: a writable BASE_PATH folder counts as the volume, else no "
            "breaker. The image sets /var/lib/vllm-worker (docs/image.md).",
            "crash_loop_ledger_dir"),
    Setting("RULES_PATH", "", p.rule_pack_path,
            "Rule pack folder (or file) to diagnose vLLM's output with; default: the "
            "built-in pack. A missing, unreadable or broken pack is a bad setting: the "
            "worker answers every job (or request) with the error, naming RULES_PATH.",
            "rules_path"),
    Setting("VLLM_EXTRA_ARGS", "", p.text,
            "Extra `vllm serve` arguments, split like a shell would and appended last.", None),
    Setting("PREFLIGHT", "true", p.parse_bool,
            "false: skip the pre-flight (hub metadata, config.json, fit, disk and the RunPod "
            "SDK's host checks before vLLM is spawned; docs/preflight.md).", "preflight"),
    Setting("PREFLIGHT_TIMEOUT", "10", p.seconds(allow_zero=False),
            "Seconds all the pre-flight's hub answers together may take; no whole answer: "
            "vLLM is launched.",
            "preflight_timeout_s"),
    Setting("AUTO_RELAX", "true", p.parse_bool,
            "false: no relaunch with CUDA graphs off (ENFORCE_EAGER) and "
            "MAX_NUM_BATCHED_TOKENS at most 8192 after vLLM ran out of memory while "
            "profiling or capturing graphs (docs/preflight.md, Relaunch).", "auto_relax"),
    Setting("RUNPOD_WEBHOOK_GET_JOB", "", p.flag,
            "Set by RunPod: the job queue's URL. Without it the worker runs the SDK's local "
            "modes (--rp_serve_api, --test_input).", "job_queue"),
    Setting("WORKER_MODE", "auto", lbp.worker_mode,
            "queue: take jobs from RunPod's queue; lb: serve a load-balancing endpoint over "
            "HTTP on PORT; auto: lb when PORT or PORT_HEALTH is set and "
            "RUNPOD_WEBHOOK_GET_JOB is not, else queue.", None),
    Setting("PORT", "80", p.port,
            "Load-balancing mode: the port requests arrive on (all interfaces).", None),
    Setting("PORT_HEALTH", "", lbp.optional_port,
            "Load-balancing mode: the port of the health check; empty: PORT.", None),
    Setting("HEALTH_CHECK_PATH", "/ping", lbp.url_path,
            "Load-balancing mode: the health check's path.", None),
    Setting("LB_HEADER_TIMEOUT", "10", p.seconds(allow_zero=False),
            "Load-balancing mode: seconds a client may take to send a request's line and "
            "headers (from its connection, or from the first byte of a later request); then "
            "408 and the connection is closed.", None),
    Setting("LB_BODY_TIMEOUT", "15", p.seconds(allow_zero=False),
            "Load-balancing mode: seconds a request body may go without a byte arriving; "
            "then 408 (the request to vLLM is dropped).", None),
    Setting("LB_MAX_BODY_BYTES", str(100 * 1024 * 1024), p.integer(1, 1 << 40),
            "Load-balancing mode: the largest request body passed to vLLM, in bytes; a "
            "larger one gets 413 (bodies are streamed to vLLM, never held whole).", None),
    Setting("LB_MAX_CONNECTIONS", "1000", p.integer(1, 1_000_000),
            "Load-balancing mode: connections PORT holds at once; lowered to fit the "
            "process's file-descriptor limit, so the health check always has room "
            "(docs/reliability.md, HTTP limits). Beyond it a connection gets 503.", None),
)
# fmt: on

WORKER_ENV = frozenset(s.name for s in SETTINGS)
BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """Everything the worker needs from its environment, validated.

    The worker's own settings come from ``SETTINGS``; the rest is vLLM's launch: the
    argument list, the model it serves and the name jobs use for it."""

    vllm_command: list[str]
    vllm_port: int
    startup_timeout_s: float
    stall_timeout_s: float
    max_concurrency: int
    request_timeout_s: float
    base_path: Path
    transient_answer_timeout_s: float
    shutdown_grace_s: float
    vllm_args: list[str]
    warnings: list[str]
    model: str
    served_model_name: str
    baked_model_path: Path | None = None
    offline: bool = False
    crash_loop_limit: int = 3
    crash_loop_window_s: float = 1800.0
    crash_loop_reset: bool = False
    crash_loop_ledger_dir: Path | None = None
    rules_path: Path | None = None
    job_queue: bool = False
    preflight: bool = True
    preflight_timeout_s: float = 10.0
    auto_relax: bool = True


def read(env: Mapping[str, str], name: str) -> Any:
    """One setting from ``env`` (its default when unset or empty), parsed."""
    setting = BY_NAME[name]
    value = p.utf8(name, env.get(name, "").strip())
    return setting.parse(name, value or setting.default)


def check_text(env: Mapping[str, str], names: frozenset[str]) -> None:
    """Raise ``ConfigError`` for the first of ``names`` whose value in ``env`` is not
    UTF-8 text (sorted, so the error is the same on every start)."""
    for name in sorted(names & env.keys()):
        p.utf8(name, env[name])


def _own(env: Mapping[str, str], *, lenient: bool = False) -> dict[str, Any]:
    """The Settings fields the table fills; ``lenient``: a bad value gives the default."""
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.field is None:
            continue
        try:
            values[setting.field] = read(env, setting.name)
        except ConfigError:
            if not lenient:
                raise
            try:
                values[setting.field] = setting.parse(setting.name, setting.default)
            except ConfigError:  # a default path the worker cannot look up: kept as given
                values[setting.field] = Path(setting.default) if setting.default else None
    return values


def fallback_settings(env: Mapping[str, str]) -> Settings:
    """What a worker whose configuration failed runs with: its own settings as far as
    they parse, defaults for the rest, and no vLLM launch (it never starts vLLM)."""
    own = _own(env, lenient=True)
    return Settings(**own, vllm_args=[], warnings=[], model="", served_model_name="")


def _config_str(config: Mapping[str, Any] | None, *keys: str) -> str | None:
    for key in keys:
        value = (config or {}).get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value:
            return value
    return None


def _flag_env_names() -> frozenset[str]:
    """Every variable ``flagmod.build_args`` may turn into a vLLM argument."""
    names = set(flagmod.load_flags().by_env) | set(flagmod.ALIASES) | flagmod.PASSTHROUGH_ENV
    return frozenset(names | {"VLLM_EXTRA_ARGS"})


def load_settings(env: Mapping[str, str]) -> Settings:
    """Read and validate the worker's settings and vLLM's arguments from ``env``.

    Every value is validated before any is used: the worker's own settings first
    (each row of ``SETTINGS``), then that every variable turned into a vLLM flag is UTF-8
    text, then vLLM's arguments."""
    for setting in SETTINGS:
        read(env, setting.name)
    check_text(env, _flag_env_names())
    baked = read_baked_model(env)
    warnings: list[str] = []
    if baked is not None:
        env, warnings = with_baked_model(env, baked)
    built = flagmod.build_args(env, reserved=WORKER_ENV)
    warnings += built.warnings

    model = flagmod.model_arg(built.args) or _config_str(built.config, "model")
    if model is None:
        raise ConfigError(
            "MODEL_NAME",
            "no model to serve: set MODEL_NAME to a Hugging Face model id or a local path",
        )
    served = (
        flagmod.served_name_arg(built.args)
        or _config_str(built.config, "served-model-name", "served_model_name")
        or model
    )
    for name in sorted(flagmod.HIDDEN_ENV.keys() & env.keys()):
        warnings.append(f"{name} is not passed to vLLM: {flagmod.HIDDEN_ENV[name]}")
    return Settings(
        **_own(env),
        vllm_args=built.args,
        warnings=warnings,
        model=model,
        served_model_name=served,
        baked_model_path=Path(baked.model_path) if baked else None,
        offline=baked is not None,
    )
