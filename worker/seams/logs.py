"""structlog setup: JSON lines on RunPod (RUNPOD_ENDPOINT_ID set) or when not on a
terminal, readable key=value lines otherwise. Every event passes the redactor (strings
nested in lists and mappings too), and no text field is longer than ``MAX_FIELD``
characters, so no input can make one log line large.

A signal handler logs through ``from_signal_handler``: Python runs a handler on the
main thread between two of its bytecodes, possibly inside a write that holds the
output's lock, and a handler that logged then would wait for that lock forever (a worker
that never exits after SIGTERM)."""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

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


_writing = threading.local()  # .active: this thread is writing a line (it holds _LOCK)
_LOCK = threading.Lock()
_deferred: queue.SimpleQueue[tuple[Any, str, dict[str, object]]] = queue.SimpleQueue()
_writer_started = False


class _LineWriter:
    """structlog's logger: one line an event on ``file``, under one lock, with the thread
    marked as writing while it may hold that lock."""

    def __init__(self, file: TextIO) -> None:
        self._file = file

    def msg(self, message: str) -> None:
        _writing.active = True
        try:
            with _LOCK:
                self._file.write(message + "\n")
                self._file.flush()
        finally:
            _writing.active = False

    log = debug = info = warn = warning = fatal = failure = err = error = critical = msg
    exception = msg


def from_signal_handler(logger: Any, event: str, **fields: object) -> None:
    """Log ``event`` at INFO from a signal handler: at once, unless the handler
    interrupted this thread in the middle of writing a line; then the writer thread
    logs it as soon as that line is done. (``SimpleQueue.put`` is safe in a handler.)"""
    if getattr(_writing, "active", False):
        _deferred.put((logger, event, fields))
    else:
        logger.info(event, **fields)


def _write_deferred() -> None:
    while True:
        logger, event, fields = _deferred.get()
        logger.info(event, **fields)


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
        logger_factory=lambda *_args, _file=sys.stderr: _LineWriter(_file),
        cache_logger_on_first_use=True,
    )
    # transitions logs every callback at DEBUG through the stdlib root logger.
    logging.getLogger("transitions").setLevel(logging.WARNING)
    global _writer_started
    if not _writer_started:
        _writer_started = True
        threading.Thread(target=_write_deferred, name="signal-log", daemon=True).start()
