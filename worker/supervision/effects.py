"""What the lifecycle does to the world when it changes state (``machine.Effects``):
logs the change and the cold-start summary, wakes threads waiting for a settled state,
clears the crash-loop record on ready, stops vLLM on a failure or a relaunch (which the
crash-loop breaker counts), keeps what the worker states about the start (``info``: the
length in force, the estimate, the relaunches) and tells the composition root when vLLM
died after it was ready."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from diagnostics import Diagnosis, State
from worker.crashloop.crash_loop import CrashLoopBreaker
from worker.supervision.coldstart import ColdStartClock
from worker.supervision.machine import SETTLED
from worker.supervision.relaunch import Relaunch

log = structlog.get_logger("worker.supervisor")


class WorkerEffects:
    def __init__(
        self,
        clock: Callable[[], float],
        cold_start: ColdStartClock,
        breaker: CrashLoopBreaker | None,
        stop_vllm: Callable[[], None],
    ):
        self.clock = clock
        self.cold_start = cold_start
        self.breaker = breaker
        self.stop_vllm = stop_vllm
        self.settled = threading.Event()
        self.ready_line_at: float | None = None  # the output's first ready marker
        self.on_died: Callable[[], None] | None = None
        self.observers: list[Callable[[State], None]] = []
        self.summary_extra: dict[str, float] = {}  # e.g. preflight_s, for vllm.cold_start
        # What the worker states about this start (first job's metadata, health body):
        # max_model_len (the length in force), estimate (preflight.estimate), relaunches.
        self.info: dict[str, Any] = {"relaunches": []}

    def state_changed(self, source: State, dest: State) -> None:
        spent = self.cold_start.enter(dest.value, self.clock())
        log.info(
            "worker.state_changed",
            source=source.value,
            dest=dest.value,
            seconds_in_source=round(spent, 2),
        )
        for observer in self.observers:
            observer(dest)
        if dest in SETTLED:
            self.settled.set()
        if source is State.READY and dest is State.FAILED_TRANSIENT and self.on_died:
            self.on_died()

    def ready(self) -> None:
        if self.breaker is not None:
            self.breaker.cleared()
        now = self.clock()
        fields = {**self.cold_start.summary(now), **self.summary_extra}
        if self.ready_line_at is not None:
            fields["ready_after_startup_line_ms"] = round((now - self.ready_line_at) * 1000, 1)
        log.info("vllm.cold_start", **fields)

    def relaunching(self, relaunch: Relaunch, diagnosis: Diagnosis) -> None:
        """Log the relaunch (what changes and why), count it, stop this vLLM."""
        done = self.info["relaunches"]
        done.append({"kind": relaunch.kind, "changes": dict(relaunch.changes)})
        log.warning(
            "worker.relaunch",
            attempt=len(done),
            kind=relaunch.kind,
            changes=relaunch.changes,
            reason=relaunch.reason,
            rule=diagnosis.rule,
            category=str(diagnosis.category),
            evidence=diagnosis.evidence.text if diagnosis.evidence else None,
        )
        if self.breaker is not None:
            self.breaker.relaunched(relaunch.kind)
        self.stop_vllm()

    def failed(self, state: State, diagnosis: Diagnosis) -> None:
        log.error(
            "worker.failed",
            state=state.value,
            category=str(diagnosis.category),
            rule=diagnosis.rule,
            message=diagnosis.message,
            evidence_line=diagnosis.evidence.line if diagnosis.evidence else None,
            evidence=diagnosis.evidence.text if diagnosis.evidence else None,
        )
        self.stop_vllm()
