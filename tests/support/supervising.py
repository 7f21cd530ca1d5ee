"""Driving a ``Supervisor`` to a settled state in a test and stopping it cleanly: the
short ``FAST`` timings, ``settle`` and ``stop`` (which checks vLLM's group is gone)."""

from __future__ import annotations

import sys
import traceback

from diagnostics import State
from tests.support.vllm_env import group_alive
from worker.supervision.supervisor import Supervisor, Timing

FAST = Timing(sample_every_s=0.05, progress_every_s=5.0, linger_after_fatal_s=0.3)


def settle(supervisor: Supervisor) -> State:
    """Run ``supervisor`` in its thread until it settles (30 s at most); its state."""
    supervisor.run_in_thread()
    assert supervisor.settled.wait(30), stuck(supervisor)
    return supervisor.state


def stop(supervisor: Supervisor) -> None:
    """Stop ``supervisor``; no process of vLLM's group may outlive it."""
    supervisor.request_stop()
    assert supervisor.wait_stopped(30), stuck(supervisor)
    assert supervisor.process.pid is None or not group_alive(supervisor.process.pid)


def stuck(supervisor: Supervisor) -> str:
    """What a supervisor that did not settle or stop in time was doing: its state, its
    vLLM process and every thread's stack (a flake in CI left only the timeout)."""
    process = supervisor.process
    stacks = "\n".join(
        f"--- thread {ident}:\n" + "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    )
    return (
        f"state {supervisor.state.value}, vLLM pid {process.pid} running {process.running} "
        f"phase {process.phase.value}, spawned {supervisor.spawned.is_set()}, "
        f"last lines {supervisor.tail(5)}\n{stacks}"
    )
