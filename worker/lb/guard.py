"""One public port's limits and its file-descriptor budget.

* ``Guard``: the limits (``worker.lb.mode.Limits``) a port's connections share, and the
  refusals counted and logged (the first of each status per 10 s: a flood stays quiet);
* ``connection_cap``, ``raise_nofile``: the connections ``PORT`` may hold, fitted to the
  process's file-descriptor limit with room left for the health check, vLLM and the
  worker (the numbers are in docs/reliability.md, HTTP limits);
* ``raw``: an answer the server gives itself, as the bytes of a whole HTTP/1.1 response;
* the timings of a lingering close and of the last call on stop, which the protocol
  (``worker.lb.connection``, ``worker.lb.guarded_http``) follows.
"""

from __future__ import annotations

import resource
import time

import structlog

from worker.lb import bodies
from worker.lb.health import respond
from worker.lb.mode import Limits

log = structlog.get_logger("worker.lb")

# The file-descriptor budget (``connection_cap``). Each request on PORT holds two
# descriptors (the client's and the one to vLLM).
FD_SPARE = 64  # the worker's own: stdio, pipes to vLLM, loops, the probe, logs
HEALTH_CONNECTIONS = 32  # PORT_HEALTH's own connections (the platform probes one at a time)
HEALTH_RESERVE = 8  # PORT_HEALTH == PORT: connections past the cap that may ask the health path
REFUSING = 16  # per port: connections answered 503 with a lingering close; past it, closed at once
# A connection refused, or whose request was not read whole: how long its unread bytes
# are read and dropped after the answer (then it is closed), and at most how many.
LINGER_S = 1.0
LINGER_BYTES = 1 << 20
# On stop: how long an idle connection may still start a request (answered, then closed).
LAST_CALL_S = 1.0


def connection_cap(limit: int, nofile: int) -> int:
    """The connections PORT may hold: ``limit`` (LB_MAX_CONNECTIONS), lowered so that two
    descriptors for each, the health port's, the refusals' and ``FD_SPARE`` fit under the
    process's file-descriptor limit ``nofile``."""
    fixed = FD_SPARE + HEALTH_CONNECTIONS + HEALTH_RESERVE + 2 * REFUSING
    return max(1, min(limit, (nofile - fixed) // 2))


def raise_nofile() -> int:
    """Raise the soft file-descriptor limit to the hard one (capped at 2**20); return the
    soft limit in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard if hard != resource.RLIM_INFINITY else 1 << 20, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        return soft
    return wanted


class Guard:
    """One port's limits, shared by its connections."""

    def __init__(self, port: int, limits: Limits, connections: int, health_path: str | None):
        self.port = port
        self.limits = limits
        self.connections = connections
        # PORT_HEALTH == PORT: the path a connection past the cap may still ask.
        self.health_path = health_path
        self._logged: dict[int, float] = {}
        self.refused: dict[int, int] = {}

    def refused_one(self, status: int) -> None:
        """Count a refusal; log the first of each status per 10 s (a flood stays quiet)."""
        self.refused[status] = self.refused.get(status, 0) + 1
        now = time.monotonic()
        if now - self._logged.get(status, -1e9) >= 10:
            self._logged[status] = now
            log.warning("lb.refused", port=self.port, status=status, so_far=self.refused[status])

    async def busy(self, scope, receive, send) -> None:
        """The app for a connection past the cap asking anything but the health path."""
        await respond(send, bodies.too_many_connections(self.connections))


def raw(answer: bodies.Answer) -> bytes:
    """``answer`` as a whole HTTP/1.1 response."""
    lines = [f"HTTP/1.1 {answer.status} {_REASON.get(answer.status, '')}".encode()]
    lines += [name + b": " + value for name, value in answer.headers]
    lines.append(b"content-length: " + str(len(answer.body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + answer.body


_REASON = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}
