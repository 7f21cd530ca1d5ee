"""Which endpoint type this worker serves, where, and the limits on its clients: pure,
from the environment.

``WORKER_MODE`` forces it (``queue`` or ``lb``). With ``auto`` (the default) the worker
serves a **load-balancing** endpoint when ``PORT`` or ``PORT_HEALTH`` is set and
``RUNPOD_WEBHOOK_GET_JOB`` (the job queue's URL, which RunPod gives every queue worker)
is not; otherwise it is a **queue** worker.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from worker.config import settings
from worker.config.errors import ConfigError


class Mode(enum.Enum):
    QUEUE = "queue"
    LB = "lb"


# What one request's line and headers may hold: their bytes, and how many headers.
# Far above what an OpenAI client sends (under 2 KiB, about 15 headers); large enough for
# long bearer tokens and cookies, small enough that parsing one is instant.
HEADER_BYTES = 64 * 1024
HEADER_COUNT = 100


@dataclass(frozen=True)
class Limits:
    """What a client of the public ports may send and hold (docs/reliability.md, HTTP
    limits). ``connections`` is LB_MAX_CONNECTIONS; the run loop lowers it to fit the
    process's file-descriptor limit."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 15.0
    body_bytes: int = 100 * 1024 * 1024
    connections: int = 1000
    header_bytes: int = HEADER_BYTES
    header_count: int = HEADER_COUNT


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Endpoint:
    """The endpoint type, and for load balancing the public ports, health path and the
    limits on clients."""

    mode: Mode
    port: int
    health_port: int
    health_path: str
    limits: Limits = DEFAULT_LIMITS


def select_mode(forced: str, env: Mapping[str, str]) -> Mode:
    """``forced`` is WORKER_MODE's parsed value; ``auto`` looks at the environment."""
    if forced != "auto":
        return Mode(forced)
    lb_ports = any(env.get(name, "").strip() for name in ("PORT", "PORT_HEALTH"))
    queued = settings.read(env, "RUNPOD_WEBHOOK_GET_JOB")  # Settings.job_queue
    return Mode.LB if lb_ports and not queued else Mode.QUEUE


def read_endpoint(env: Mapping[str, str]) -> tuple[Endpoint, ConfigError | None]:
    """The endpoint, and the first bad value met (a bad value gives its default, so a
    load-balancing worker can still answer on its ports with the configuration error)."""
    error: ConfigError | None = None

    def value(name: str):
        nonlocal error
        try:
            return settings.read(env, name)
        except ConfigError as exc:
            error = error or exc
            return settings.read({}, name)

    mode = select_mode(value("WORKER_MODE"), env)
    port = value("PORT")
    health_port = value("PORT_HEALTH") or port
    if mode is Mode.LB and error is None:
        vllm_port = value("VLLM_PORT")
        for name, public in (("PORT", port), ("PORT_HEALTH", health_port)):
            if public == vllm_port and error is None:
                error = ConfigError(
                    name,
                    f"{public} is VLLM_PORT too, where vLLM listens: give one of them another port",
                )
    limits = Limits(
        header_timeout_s=value("LB_HEADER_TIMEOUT"),
        body_timeout_s=value("LB_BODY_TIMEOUT"),
        body_bytes=value("LB_MAX_BODY_BYTES"),
        connections=value("LB_MAX_CONNECTIONS"),
    )
    return Endpoint(mode, port, health_port, value("HEALTH_CHECK_PATH"), limits), error
