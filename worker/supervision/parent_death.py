"""Child processes that end when the worker ends, even when it is SIGKILLed.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is set in the child, so no
cleanup in the worker has to run. Two kinds of children get it:

* vLLM (``die_with_parent`` before exec, from ``worker/supervision/vllm_process.py``): SIGTERM,
  which vLLM handles by shutting down its engine processes too;
* what the worker forks without exec (``children_die_with_me``): the RunPod SDK's
  heartbeat process and multiprocessing's helpers. SIGKILL: they hold nothing. A
  heartbeat outliving the worker would go on pinging the queue for a dead worker.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

_PR_SET_PDEATHSIG = 1
_prctl: Any
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None

_forks_of: int | None = None  # the process whose forked children get the signal


def die_with_parent(parent: int, signum: int = signal.SIGTERM) -> None:
    """In a child of ``parent``: get ``signum`` when the parent dies."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was set
        os.kill(os.getpid(), signal.SIGKILL)


def children_die_with_me() -> None:
    """From now on, every child this process forks (not exec'd) gets SIGKILL when this
    process dies; their own children do not (they have another parent)."""
    global _forks_of
    first = _forks_of is None
    _forks_of = os.getpid()
    if first:
        os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    global _forks_of
    parent, _forks_of = _forks_of, None
    if parent is not None:
        die_with_parent(parent, signal.SIGKILL)
