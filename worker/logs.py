"""structlog setup: JSON lines on RunPod (RUNPOD_ENDPOINT_ID set) or when not on a
terminal, readable key=value lines otherwise. Every event passes the redactor."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

import structlog

from diagnostics.redact import Redactor


def _redacting(redact: Redactor):
    def processor(_logger, _name, event_dict):
        return {
            key: redact(value) if isinstance(value, str) else value
            for key, value in event_dict.items()
        }

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
