"""Parsers for environment values: each takes ``(var, value)`` and returns the parsed value
or raises ``ConfigError`` naming ``var``.

Pure. Numbers are ASCII only (``str.isdigit`` and ``int()`` also accept full-width and
other Unicode digits, and ``int()`` accepts ``1_000``); durations are bounded so no timer
or wait can overflow.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from diagnostics.redaction import secrets
from diagnostics.redaction.redact import redact
from worker.config.errors import ConfigError

Parser = Callable[[str, str], object]

# The longest duration any setting may hold: a week. threading.Timer and Event.wait raise
# OverflowError beyond about 292 years, long before float('inf').
MAX_SECONDS = 7 * 24 * 3600.0

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
BOOL_HINT = "true/false, 1/0, yes/no or on/off"
_ASCII_INT = re.compile(r"[+-]?[0-9]+")
_ASCII_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def is_secret(name: str) -> bool:
    """Whether values of this variable must never be shown (the one rule:
    ``diagnostics.redaction.secrets.is_secret``)."""
    return secrets.is_secret(name)


def shown(name: str, value: str) -> str:
    """The value as it may appear in a message about variable ``name``."""
    return "<redacted>" if is_secret(name) else repr(redact(value))


def parse_bool(var: str, value: str) -> bool:
    """A boolean: true/false, 1/0, yes/no, on/off (any case)."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(var, f"expected {BOOL_HINT}, got {shown(var, value)}")


def ascii_int(value: str) -> int:
    """``int(value)`` for ASCII decimal digits only; ValueError otherwise."""
    if not _ASCII_INT.fullmatch(value.strip()):
        raise ValueError(value)
    return int(value)


def ascii_float(value: str) -> float:
    """``float(value)`` for ASCII numbers only (no Unicode digits, no ``_``); ValueError
    otherwise. ``nan``/``inf`` are not numbers here."""
    if not _ASCII_NUMBER.fullmatch(value.strip()):
        raise ValueError(value)
    return float(value)


def integer(minimum: int, maximum: int | None = None) -> Callable[[str, str], int]:
    """An ASCII integer within ``[minimum, maximum]``."""

    def parse(var: str, value: str) -> int:
        try:
            number = ascii_int(value)
        except ValueError:
            raise ConfigError(var, f"expected an integer, got {shown(var, value)}") from None
        if number < minimum or (maximum is not None and number > maximum):
            upper = f" and <= {maximum}" if maximum is not None else ""
            raise ConfigError(var, f"expected an integer >= {minimum}{upper}, got {number}")
        return number

    return parse


def port(var: str, value: str) -> int:
    """A TCP port, 1-65535."""
    return integer(1, 65535)(var, value)


def seconds(allow_zero: bool) -> Callable[[str, str], float]:
    """A duration in seconds, finite, at most ``MAX_SECONDS``."""

    def parse(var: str, value: str) -> float:
        try:
            number = ascii_float(value)
        except ValueError:
            number = math.nan
        lower_ok = number > 0 or (allow_zero and number == 0)
        if not (lower_ok and number <= MAX_SECONDS):
            bound = ">= 0" if allow_zero else "> 0"
            raise ConfigError(
                var,
                f"expected a number of seconds {bound} and <= {MAX_SECONDS:g} (a week), "
                f"got {shown(var, value)}",
            )
        return number

    return parse


def path(var: str, value: str) -> Path:
    """A filesystem path (not checked: the reader decides what must exist)."""
    return Path(value)


def optional_path(var: str, value: str) -> Path | None:
    """A path, or None when unset."""
    return Path(value) if value else None


def text(var: str, value: str) -> str:
    """The value as given (trimmed)."""
    return value


def flag(var: str, value: str) -> bool:
    """Set (any non-empty value) or not."""
    return bool(value)


def command(var: str, value: str) -> list[str]:
    """A command line, split like a shell would."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(var, f"cannot split into arguments: {exc}") from None
    if not words:
        raise ConfigError(var, "is empty")
    return words
