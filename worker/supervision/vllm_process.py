"""vLLM's process: built unstarted, spawned in its own process group, drained line by line,
stopped as a group (SIGTERM, then SIGKILL after the grace period).

``ProcessPhase`` is where the process object is: unstarted, running, or stopping (a stop
was requested; it stays so after the exit, which is how the supervisor tells a requested
exit from a crash). The stand-in processes of the tests (``tests/support``) run through
the same object: only the command differs.

Child processes end when the worker ends, even when it is SIGKILLed: Linux's
parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is set in the child, so no cleanup in
the worker has to run. Two kinds of children get it:

* vLLM (``die_with_parent`` before exec): SIGTERM, which vLLM handles by shutting down
  its engine processes too;
* what the worker forks without exec (``children_die_with_me``): the RunPod SDK's
  heartbeat process and multiprocessing's helpers. SIGKILL: they hold nothing. A
  heartbeat outliving the worker would go on pinging the queue for a dead worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import fcntl
import functools
import os
import signal
from collections.abc import AsyncIterator, Sequence
from typing import Any

import structlog

from diagnostics.formats.streams import LineSplitter

log = structlog.get_logger("worker.vllm_process")

_PIPE_SIZE = 1 << 20

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


class ProcessPhase(enum.Enum):
    UNSTARTED = "unstarted"
    RUNNING = "running"
    STOPPING = "stopping"  # a stop was requested (before or after the spawn)


class VllmProcess:
    """One run of ``argv`` with ``env``; all methods run on the supervisor's event loop
    except ``request_stop``, which only records the request (thread-safe)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], grace_s: float):
        self.argv = list(argv)
        self.env = env
        self.grace_s = grace_s
        self.phase = ProcessPhase.UNSTARTED
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def stop_requested(self) -> bool:
        return self.phase is ProcessPhase.STOPPING

    def request_stop(self) -> None:
        self.phase = ProcessPhase.STOPPING

    async def spawn(self) -> bool:
        """Start the process; False when a stop came first (nothing is started).
        Raises OSError when the command cannot run."""
        if self.stop_requested:
            return False
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
            preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
        )
        if not self.stop_requested:
            self.phase = ProcessPhase.RUNNING
        _widen_pipe(self._proc)
        return True

    async def lines(self) -> AsyncIterator[bytes]:
        """Every line of output (newline kept) until the pipe closes; a line longer than
        ``streams.MAX_LINE`` comes in pieces, cut as ``diagnose`` cuts it (no secret split)."""
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        splitter = LineSplitter()
        while chunk := await stream.read(65536):
            for line in splitter.feed(chunk):
                yield line
        for line in splitter.close():
            yield line

    async def wait(self) -> int:
        assert self._proc is not None
        return await self._proc.wait()

    async def kill(self) -> None:
        """Stop the whole process group: SIGTERM, SIGKILL after the grace period (also
        reaps stragglers in the group after the main process exited)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.grace_s)
            except TimeoutError:
                log.warning(
                    "vllm.kill", reason="did not stop within the grace period", grace_s=self.grace_s
                )
        _signal_group(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            await proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _widen_pipe(proc: asyncio.subprocess.Process) -> None:
    """Give vLLM's stdout pipe 1 MiB (Linux) so bursts never wait for our reader."""
    with contextlib.suppress(Exception):
        transport = proc._transport  # type: ignore[attr-defined]
        pipe = transport.get_pipe_transport(1).get_extra_info("pipe")
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
