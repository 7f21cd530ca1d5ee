"""structlog setup: JSON lines on RunPod (RUNPOD_ENDPOINT_ID set) or when not on a
terminal, readable key=value lines otherwise. Every event passes the redactor (strings
nested in lists and mappings too), and no text field is longer than ``MAX_FIELD``
characters, so no input can make one log line large."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

import structlog

from diagnostics.redaction.redact import Redactor, truncate

MAX_FIELD = 8192


def _clean(value: object, redact: Redactor, depth: int = 0) -> object:
    if isinstance(value, str):
        text = redact(value)
        if len(text) > MAX_FIELD:
            cut = truncate(text, MAX_FIELD)
            text = f"{cut}... ({len(text) - len(cut)} more characters)"
        return text
    if depth >= 4:
        return value if isinstance(value, int | float | bool | None) else "..."
    if isinstance(value, list | tuple):
        return [_clean(item, redact, depth + 1) for item in value[:100]]
    if isinstance(value, dict):
        return {str(k): _clean(v, redact, depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, int | float | bool | None):
        return value
    return _clean(str(value), redact, depth)


def _redacting(redact: Redactor):
    def processor(_logger, _name, event_dict):
        return {key: _clean(value, redact) for key, value in event_dict.items()}

    return processor


def configure(env: Mapping[str, str], redact: Redactor) -> None:
    as_json = bool(env.get("RUNPOD_ENDPOINT_ID")) or not sys.stderr.isatty()
    renderer = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redacting(redact),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # transitions logs every callback at DEBUG through the stdlib root logger.
    logging.getLogger("transitions").setLevel(logging.WARNING)
