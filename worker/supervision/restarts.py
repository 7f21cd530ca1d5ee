"""The vLLM processes of one start, one after another: the first, and the relaunches.

Each process is spawned and followed to its exit (every line to the follower, the
download watch beside it, its group reaped). Before the first spawn, the length the
pre-flight's estimate chose (``relaunch_apply.auto_length``); after a failure, whether it
calls for a relaunch with what vLLM measured (``relaunch.decide``: never after a
requested stop, never past the crash-loop breaker); and a relaunch applied: a new
process, classifier and watchdog with the changed arguments, handed to the follower,
once the old vLLM has exited.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import structlog

from diagnostics import Classifier, Diagnosis, RulePack
from diagnostics.redaction.redact import Redactor
from worker.config.settings import Settings
from worker.seams.downloads import DownloadWatch, hf_cache_dir
from worker.supervision import launch
from worker.supervision import relaunch_apply as relaunch
from worker.supervision.failure import config_failure
from worker.supervision.follower import StartFollower, Timing
from worker.supervision.relaunch import Relaunch, decide
from worker.supervision.vllm_process import VllmProcess
from worker.supervision.watchdog import Watchdog

log = structlog.get_logger("worker.supervisor")


def new_watchdog(
    classifier: Classifier, now: float, settings: Settings, timing: Timing
) -> Watchdog:
    """The limits of one vLLM process, from ``now``."""
    return Watchdog(
        classifier,
        now,
        settings.startup_timeout_s,
        settings.stall_timeout_s,
        timing.linger_after_fatal_s,
    )


class Restarts:
    """The vLLM processes of one start: the first, and the relaunches after it.

    It answers the follower's ``relaunch_for`` and replaces the follower's process,
    classifier and watchdog; ``stop_requested`` says whether a stop was asked for;
    ``spawned`` is set once the first spawn was tried."""

    def __init__(
        self,
        follower: StartFollower,
        pack: RulePack,
        redact: Redactor,
        stop_requested: Callable[[], bool],
        spawned: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        timing: Timing | None = None,
    ):
        self.settings: Settings = follower.settings
        self.follower, self.pack, self.redact = follower, pack, redact
        self.stop_requested, self.spawned = stop_requested, spawned
        self.clock, self.timing = clock, timing or Timing()
        self.args = list(self.settings.vllm_args)  # vLLM's arguments now (a relaunch changes them)
        self.exit_code: int | None = None
        follower.relaunch_for = self.relaunch_for

    def first(self) -> None:
        """Before the first spawn: the length the pre-flight's estimate chose, if any."""
        initial = relaunch.auto_length(self.args, self.follower.effects.info.get("estimate"))
        if initial is not None:
            self.replace(initial.changes)
            log.info(
                "worker.max_model_len",
                source="estimate",
                reason=initial.reason,
                max_model_len=initial.changes.get("MAX_MODEL_LEN") or None,
            )

    async def run(self) -> None:
        """The first vLLM process, then another while a relaunch is pending and the start
        is neither settled nor asked to stop."""
        follow = self.follower
        self.first()
        while True:
            await self.run_once()
            pending, follow.pending = follow.pending, None
            if pending is None or follow.lifecycle.settled:
                return
            if self.stop_requested():
                follow.lifecycle.stop()
                return
            self.replace(pending.changes)

    async def run_once(self) -> None:
        """One vLLM process: spawn it, read its output to the end, settle by its exit
        (or leave a relaunch pending)."""
        follow = self.follower
        process = follow.process
        cache = hf_cache_dir(process.env)
        command = self.redact(" ".join(process.argv))
        log.info("vllm.spawning", command=command, hf_cache=str(cache))
        try:
            spawned = await process.spawn()
        except OSError as exc:
            message = f"cannot run {process.argv[0]!r}: {exc.strerror or exc}"
            follow.fail(config_failure("VLLM_COMMAND", message))
            return
        finally:
            self.spawned.set()
        if not spawned:
            return
        log.info("vllm.spawned", pid=process.pid)
        if process.stop_requested:
            await process.kill()
        watch = DownloadWatch(cache)
        tasks = [asyncio.create_task(follow.watch(watch)), asyncio.create_task(follow.total(watch))]
        try:
            async for raw in process.lines():
                follow.line(raw)
            self.exit_code = await process.wait()
        finally:
            for task in [*tasks, *([follow.probe] if follow.probe else [])]:
                task.cancel()
            await process.kill()  # reap stragglers in the group, even after a clean exit
        follow.exited(self.exit_code)

    def replace(self, changes: dict[str, str]) -> None:
        """A new vLLM process (and classifier, watchdog) with ``changes`` made."""
        follow = self.follower
        self.args, env = relaunch.apply(self.args, follow.process.env, changes)
        argv = launch.vllm_argv(self.settings, self.args)
        follow.process = VllmProcess(argv, env, self.settings.shutdown_grace_s)
        if self.stop_requested():  # after the swap: a stop asked from now on reaches it
            follow.process.request_stop()
        follow.classifier = Classifier(self.pack, redactor=self.redact)
        follow.watchdog = new_watchdog(follow.classifier, self.clock(), self.settings, self.timing)
        follow.probe = None

    def relaunch_for(self, diagnosis: Diagnosis) -> Relaunch | None:
        """The relaunch a failure of a spawned vLLM calls for (``relaunch.decide``)."""
        follow = self.follower
        effects = follow.effects
        if follow.process.pid is None or self.stop_requested() or effects.breaker is None:
            return None
        estimate = effects.info.get("estimate") or {}
        context = relaunch.context_of(
            self.settings.vllm_args,
            self.args,
            follow.process.env,
            auto_relax=self.settings.auto_relax,
            weights_fit=estimate.get("weights_fit"),
            done=tuple(r["kind"] for r in effects.info["relaunches"]),
            breaker_allows=effects.breaker.allows_relaunch(),
        )
        failure = relaunch.failure_of(diagnosis, self.pack, follow.lifecycle.state)
        return decide(failure, context)
