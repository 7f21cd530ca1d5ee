"""Parsers for the load-balancing settings, in ``worker.config.parsers``' style: each takes
``(var, value)`` and returns the parsed value or raises ``ConfigError`` naming ``var``.

Pure; imports nothing of the worker but the shared parsers (``worker.config.settings`` refers to
these from its table, so this module must not import it back).
"""

from __future__ import annotations

import re

from worker.config import parsers as p
from worker.config.errors import ConfigError

MODES = ("auto", "queue", "lb")
# An absolute URL path: no query, fragment, whitespace or control characters.
_PATH = re.compile(r"/[^\s?#\x00-\x1f\x7f]*")


def worker_mode(var: str, value: str) -> str:
    """One of ``auto``, ``queue``, ``lb`` (any case)."""
    lowered = value.strip().lower()
    if lowered not in MODES:
        raise ConfigError(var, f"expected auto, queue or lb, got {p.shown(var, value)}")
    return lowered


def optional_port(var: str, value: str) -> int | None:
    """A TCP port, or None when unset."""
    return p.port(var, value) if value else None


def url_path(var: str, value: str) -> str:
    """An absolute URL path such as ``/ping``."""
    if not _PATH.fullmatch(value):
        raise ConfigError(
            var, f"expected an absolute path such as /ping, got {p.shown(var, value)}"
        )
    return value
