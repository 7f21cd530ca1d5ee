"""Which endpoint type this worker serves, and where: pure, from the environment.

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


@dataclass(frozen=True)
class Endpoint:
    """The endpoint type, and for load balancing the public ports and health path."""

    mode: Mode
    port: int
    health_port: int
    health_path: str


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
    return Endpoint(mode, port, health_port, value("HEALTH_CHECK_PATH")), error
