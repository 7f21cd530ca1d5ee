"""Parsers for environment values: each takes ``(var, value)`` and returns the parsed value
or raises ``ConfigError`` naming ``var``.

Pure, but for the path parsers: they look the path up (``os.stat``, never a read of a
file's content, except the listing of a rule-pack folder), so a path the worker cannot
search, or with a name over 255 bytes, is a bad value named here rather than an
exception wherever it is first used. Numbers are ASCII only (``str.isdigit`` and
``int()`` also accept full-width and other Unicode digits, and ``int()`` accepts
``1_000``); durations are bounded so no timer or wait can overflow.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shlex
import stat
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


# The longest name of one path component (NAME_MAX on Linux filesystems), in bytes.
NAME_MAX = 255
# A rule pack larger than this is not a rule pack (the built-in one is ~0.3 MiB).
RULE_PACK_MAX_BYTES = 16 * 1024 * 1024


def utf8(var: str, value: str) -> str:
    """The value, when it is valid UTF-8 text. ``os.environ`` carries an undecodable
    byte as a lone surrogate, which no answer, log line or HTTP header could encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(value[exc.start]) & 0xFF
        raise ConfigError(
            var, f"is not valid UTF-8 text (byte 0x{byte:02x} at position {exc.start})"
        ) from None
    return value


def _lookup(var: str, value: str) -> os.stat_result | None:
    """``os.stat`` of the path ``value``: None when nothing is there; a ConfigError when
    the worker cannot look (a folder it may not search, a name too long, a loop)."""
    too_long = [part for part in Path(value).parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        start = shown(var, too_long[0][:40])
        raise ConfigError(var, f"a name in the path is longer than {NAME_MAX} bytes ({start}...)")
    try:
        return os.stat(value)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(var, f"the worker cannot look up {shown(var, value)}: {reason}") from None


def path(var: str, value: str) -> Path:
    """A filesystem path the worker can look up (it need not exist)."""
    _lookup(var, value)
    return Path(value)


def optional_path(var: str, value: str) -> Path | None:
    """A path, or None when unset."""
    return path(var, value) if value else None


def optional_path_as_given(var: str, value: str) -> Path | None:
    """A path not looked up here, or None when unset: for a folder whose reader copes with
    any path itself (the crash-loop ledger's: a problem there is logged, never fatal)."""
    return Path(value) if value else None


def folder_path(var: str, value: str) -> Path:
    """A folder's path the worker can look up: absent, or a folder it may search."""
    found = _lookup(var, value)
    if found is not None:
        if not stat.S_ISDIR(found.st_mode):
            raise ConfigError(var, f"{shown(var, value)} is not a folder")
        if not os.access(value, os.X_OK):
            raise ConfigError(var, f"the worker may not search the folder {shown(var, value)}")
    return Path(value)


def rule_pack_path(var: str, value: str) -> Path | None:
    """A rule pack: a readable regular file, or a folder holding ``*.yaml`` regular files,
    at most ``RULE_PACK_MAX_BYTES`` in all; None when unset (the built-in pack). Its
    content is judged when it is loaded."""
    if not value:
        return None
    found = _lookup(var, value)
    if found is None:
        raise ConfigError(var, f"no rule file or folder at {shown(var, value)}")
    root = Path(value)
    if stat.S_ISDIR(found.st_mode):
        try:
            names = sorted(n for n in os.listdir(root) if n.endswith(".yaml"))
        except OSError as exc:
            raise ConfigError(var, f"cannot list {shown(var, value)}: {exc.strerror}") from None
        files = []
        for name in names:
            found_file = _lookup(var, str(root / name))
            if found_file is not None and stat.S_ISREG(found_file.st_mode):
                files.append((root / name, found_file))
        if not files:
            raise ConfigError(var, f"no *.yaml rule files in {shown(var, value)}")
    elif stat.S_ISREG(found.st_mode):
        files = [(root, found)]
    else:
        raise ConfigError(var, f"{shown(var, value)} is neither a rule file nor a folder")
    total = sum(st.st_size for _, st in files)
    if total > RULE_PACK_MAX_BYTES:
        raise ConfigError(
            var, f"the rule pack is {total} bytes, more than {RULE_PACK_MAX_BYTES} allowed"
        )
    for file, _ in files:
        if not os.access(file, os.R_OK):
            raise ConfigError(var, f"the worker may not read {shown(var, str(file))}")
    return root


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
