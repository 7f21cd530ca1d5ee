"""A guarded connection on a public port: its admission, deadlines and closing.

``GuardedConnection`` is the half of uvicorn's httptools protocol that concerns the
connection rather than the bytes of a request (those are ``worker.lb.guarded_http``'s):

* admission: ``guard.connections`` of them on the port; past it a connection gets 503
  (when ``PORT_HEALTH`` is ``PORT``, ``HEALTH_RESERVE`` more may still ask the health
  path); past ``REFUSING`` more it is answered and closed at once;
* the header deadline: a request's line and headers within ``header_timeout_s`` of the
  connection (or of the first byte of a later request on it), else 408;
* refusals and closing: an answer the server gives itself is written raw, then the
  connection is closed by a lingering close (our side shut, the rest read and dropped
  for ``LINGER_S``, at most ``LINGER_BYTES``), so the client reads the answer rather
  than a reset;
* on stop, every connection gets an answer: a request under way finishes (with
  ``Connection: close``), a request whose head is arriving is answered once it is in,
  and an idle connection may still start one for ``LAST_CALL_S``.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from worker.lb import bodies
from worker.lb.guard import (
    HEALTH_RESERVE,
    LAST_CALL_S,
    LINGER_S,
    REFUSING,
    Guard,
    raw,
)


class CycleTransport:
    """The transport a request's cycle writes to: its close is the protocol's gentle one
    (a lingering close when the request was not read whole)."""

    def __init__(self, protocol: GuardedConnection) -> None:
        self._protocol = protocol
        self._transport = protocol.transport

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._protocol.close_gently()


class GuardedConnection(HttpToolsProtocol):
    """uvicorn's httptools protocol, its connection guarded (module doc); the request's
    bytes are guarded by the subclass, ``worker.lb.guarded_http.GuardedHttp``."""

    guard: Guard  # set on the subclass made for each port (``guarded_http.protocol_for``)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # bytes arriving now are a request's line and headers
        self._head_begun = False  # a request's first byte came, its head is not complete
        self._head_bytes = 0
        self._head_count = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._stopping = False
        self._closing = False  # answered or refused: what still arrives is dropped
        self._dropped = 0
        # The request body: not all read yet; its declared length (None: chunked); the
        # bytes seen; those dropped after an early answer.
        self._body_pending = False
        self._body_declared: int | None = None
        self._body_seen = 0
        self._discarded = 0
        self._health_only = False

    # -- connections

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        guard, held = self.guard, len(self.connections)
        if held > guard.connections:
            reserve = HEALTH_RESERVE if guard.health_path is not None else 0
            if held <= guard.connections + reserve:
                self._health_only = True
            elif held <= guard.connections + reserve + REFUSING:
                self._refuse(bodies.too_many_connections(guard.connections))
                return
            else:  # no room to linger: the answer, and the descriptor back at once
                guard.refused_one(503)
                self._closing = True
                transport.write(raw(bodies.too_many_connections(guard.connections)))
                transport.close()
                return
        self._arm_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        for timer in self._timers:
            timer.cancel()
        super().connection_lost(exc)

    def eof_received(self) -> None:
        if self._closing:
            self.transport.close()

    # -- timers, refusals, closing

    def _arm_deadline(self) -> None:
        self._cancel_deadline()
        timeout = self.guard.limits.header_timeout_s
        self._deadline = self.loop.call_later(timeout, self._head_late)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        if self._in_head and not (self.cycle is not None and not self.cycle.response_complete):
            self._refuse(bodies.header_timeout(self.guard.limits.header_timeout_s))

    def _refuse(self, answer: bodies.Answer) -> None:
        """Answer ``answer`` before any app saw the request, then close (lingering)."""
        if self._closing or self.transport.is_closing():
            return
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        self.guard.refused_one(answer.status)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer is under way on this connection: cut it
            return
        self.transport.write(raw(answer))
        self._linger()

    def close_gently(self) -> None:
        """Close; when the request's bytes were not all read, linger first."""
        if self._closing or self.transport.is_closing():
            return
        unread = self._head_begun or self._body_pending
        if unread:
            self._linger()
        else:
            self.transport.close()

    def _linger(self) -> None:
        self._closing = True
        self._cancel_deadline()
        self.flow.resume_reading()
        try:
            self.transport.write_eof()
        except (OSError, RuntimeError, NotImplementedError):
            self.transport.close()
            return
        self._timers.append(self.loop.call_later(LINGER_S, self.transport.close))

    def shutdown(self) -> None:
        """The server stops: answer what is under way or arriving, then close."""
        self._stopping = True
        if self._closing:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        elif not self._head_begun:
            self._timers.append(self.loop.call_later(LAST_CALL_S, self._close_if_idle))
        # else: a head is arriving; it is answered once in (or at the header deadline)

    def _close_if_idle(self) -> None:
        in_flight = self.cycle is not None and not self.cycle.response_complete
        if not (self._closing or self._head_begun or in_flight or self.transport.is_closing()):
            self.transport.close()
