"""``GuardedHttp``: uvicorn's httptools protocol with the limits a public port needs on
each request (``worker.lb.mode.Limits``; the numbers are in docs/reliability.md, HTTP
limits). The connection's own guard (admission, deadlines, refusals, the lingering
close, stop) is its base, ``worker.lb.connection.GuardedConnection``.

* a request's line and headers: at most ``header_bytes`` bytes, counted as they arrive
  (before httptools, whose header buffer grows by concatenation: a long header costs
  quadratic time), and ``header_count`` headers, else 431; all within
  ``header_timeout_s``, else 408 (the base's deadline);
* every answer the server gives itself (400, 408, 413, 431, 503) is JSON, in the app's
  shape (``worker.lb.bodies``); a connection whose request was not read whole is closed
  after its answer by a lingering close;
* an answer that starts while more than ``LINGER_BYTES`` of the body are still to come
  says ``connection: close``; a body answered early is read and dropped up to that.

The body bounds (``body_bytes``, ``body_timeout_s``) are ``worker.lb.proxy``'s: it
streams bodies to vLLM.
"""

from __future__ import annotations

import httptools
import structlog

from worker.lb import bodies
from worker.lb.connection import CycleTransport, GuardedConnection
from worker.lb.guard import LINGER_BYTES, Guard

log = structlog.get_logger("worker.lb")


class _Refused(Exception):
    def __init__(self, answer: bodies.Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


class GuardedHttp(GuardedConnection):
    """The request's bytes guarded (module doc)."""

    # -- bytes in

    def data_received(self, data: bytes) -> None:
        if self._closing:
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.transport.close()
            return
        self._unset_keepalive_if_required()
        if self._in_head:
            limits = self.guard.limits
            room = limits.header_bytes - self._head_bytes
            if len(data) > room:
                self._head_bytes = limits.header_bytes
                if not self._feed(data[:room]):
                    return
                if self._in_head:
                    self._refuse(bodies.headers_too_large(limits.header_bytes, limits.header_count))
                    return
                data = data[room:]
            else:
                self._head_bytes += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> bool:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.answer)
            else:
                log.warning("lb.parse_failed", error=repr(refused))
                self._refuse(bodies.bad_request())
            return False
        except httptools.HttpParserUpgrade:
            return False  # no protocol is upgraded to (ws is off): the request goes on as HTTP
        except httptools.HttpParserError:
            self._refuse(bodies.bad_request())
            return False
        return True

    # -- parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = self._head_begun = True
        self._head_count = 0
        if self._deadline is None:
            self._arm_deadline()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_count += 1
        limits = self.guard.limits
        if self._head_count > limits.header_count:
            raise _Refused(bodies.headers_too_large(limits.header_bytes, limits.header_count))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = self._head_begun = False
        self._head_bytes = 0
        self._cancel_deadline()
        self._body_pending, self._body_seen, self._discarded = True, 0, 0
        self._body_declared = _declared_length(self.headers)
        if self._health_only:
            path = httptools.parse_url(self.url).path.decode("latin-1")
            wanted = path == self.guard.health_path
            self.app = self.config.loaded_app if wanted else self.guard.busy
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not before:
            self.cycle.transport = CycleTransport(self)  # type: ignore[assignment]
            self.cycle.send = self._answer_start(self.cycle)  # type: ignore[method-assign]
            if self._stopping:
                self.cycle.keep_alive = False

    def _answer_start(self, cycle):
        """The cycle's ``send``: an answer that starts while more than ``LINGER_BYTES`` of
        the body are still to come says ``connection: close`` (the rest is not read)."""
        send = cycle.send

        async def guarded(message) -> None:
            if message["type"] == "http.response.start" and self._body_pending:
                left = self._body_declared
                if left is None or left - self._body_seen > LINGER_BYTES:
                    cycle.keep_alive = False
            await send(message)

        return guarded

    def on_body(self, body: bytes) -> None:
        self._body_seen += len(body)
        if self.cycle is not None and self.cycle.response_complete:
            # Answered before the body was read: drop the rest, up to LINGER_BYTES.
            self._discarded += len(body)
            if self._discarded > LINGER_BYTES:
                self.transport.close()
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_pending = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._closing:
            self.server_state.total_requests += 1
            return
        if self._body_pending:
            # Answered before the body was read: the rest is dropped as it comes (at most
            # LINGER_BYTES, within the header timeout), then the connection goes on.
            timeout = self.guard.limits.header_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._body_late))
        super().on_response_complete()

    def _body_late(self) -> None:
        if self._body_pending and self.cycle is not None and self.cycle.response_complete:
            self.transport.close()


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The body length a request declared: its Content-Length, 0 without one, None when
    chunked (unknown)."""
    names = {name for name, _ in headers}
    if b"transfer-encoding" in names:
        return None
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return 0


def protocol_for(guard: Guard) -> type[GuardedHttp]:
    """The protocol uvicorn runs on one port: ``GuardedHttp`` with that port's ``guard``."""
    return type("GuardedHttp", (GuardedHttp,), {"guard": guard})
