"""The crash-loop breaker as the supervisor uses it: one configuration's record in the
restart ledger (``worker.crashloop.breaker``), consulted when a start fails transiently and
cleared when a start reaches ready. A relaunch in the container
(``worker.supervision.relaunch``) counts as a failed start too."""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from diagnostics import Diagnosis
from worker.config.settings import Settings
from worker.crashloop.breaker import LEDGER_NAME, RestartLedger, config_key, judge
from worker.crashloop.ledger_path import ledger_path

log = structlog.get_logger("worker.breaker")


class CrashLoopBreaker:
    """Judges this configuration's failures against its earlier ones."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time):
        self.settings = settings
        self.key = config_key(settings.vllm_command, settings.vllm_args)
        path, reason = ledger_path(settings.base_path, settings.crash_loop_ledger_dir)
        self.ledger = RestartLedger(path, clock)
        if path is None:
            log.info("breaker.disabled", reason=reason)
        else:
            log.info("breaker.ledger", path=str(path), reason=reason)
        if settings.crash_loop_reset:
            self.ledger.clear(self.key)

    def judge(self, diagnosis: Diagnosis) -> Diagnosis:
        """The diagnosis to act on: a transient failure turns permanent once this
        configuration failed ``CRASH_LOOP_LIMIT`` times in the window; it is recorded."""
        if diagnosis.permanent is not False:
            return diagnosis
        window = self.settings.crash_loop_window_s
        history = self.ledger.recent(self.key, window)
        where = str(self.ledger.path) if self.ledger.path else LEDGER_NAME
        judged = judge(diagnosis, history, self.settings.crash_loop_limit, window, where)
        self.ledger.record(self.key, str(diagnosis.category), window)
        return judged

    def allows_relaunch(self) -> bool:
        """Whether this configuration may be relaunched in the container: fewer than
        ``CRASH_LOOP_LIMIT`` failures and relaunches recorded in the window."""
        history = self.ledger.recent(self.key, self.settings.crash_loop_window_s)
        return len(history) < self.settings.crash_loop_limit

    def relaunched(self, kind: str) -> None:
        """A relaunch in the container counts as a failed start of this configuration."""
        category = f"relaunch:{kind}"[:64]
        self.ledger.record(self.key, category, self.settings.crash_loop_window_s)
        log.info("breaker.relaunch_counted", kind=kind)

    def cleared(self) -> None:
        """A start reached ready: forget this configuration's failures."""
        self.ledger.clear(self.key)
