"""A stand-in for vLLM's HTTP server, for tests of the load-balancing proxy that need
control real vLLM does not give: an answer that waits until the test releases it, and
a way to learn that the proxy cancelled a request upstream.

Run as the worker's ``VLLM_COMMAND``; the worker appends ``--host H --port P``::

    python -m tests.support.vllm_standin [--loading] [--host H] [--port P]

Other arguments (vLLM's flags) are ignored. ``--loading``: print one of vLLM's loading
lines and stay loading until stopped (never ready). Otherwise print ``INFO Starting vLLM
stand-in``, listen, then print uvicorn's start lines on stderr (``Started server
process [PID]``, ``Waiting for application startup.``, ``Application startup
complete.``: the ready marker vLLM prints too, ``Uvicorn running on http://H:P``) and
serve:

* ``GET /health``                  200, empty body
* any method ``/echo/...``         200 (or the status in ``x-status``) and JSON with the
                                   method, path (percent-decoded), query string, headers
                                   (lower-cased names) and body received; response header
                                   ``x-upstream: echo``
* ``POST /v1/stream``              an SSE stream: ``data: first``, then (once released)
                                   ``data: second`` and ``data: [DONE]``; a client that
                                   goes away first sets "cancelled"
* ``POST /release``                releases the streams waiting now (later ones wait for
                                   the next release); 200 ``{}``
* ``GET /cancelled``               waits until a stream's client went away, then 200 ``{}``
* anything else                    404 ``{"detail": "Not Found"}``

Routes match on the path only, whatever the method. Answers are JSON
(``content-type: application/json``) with a Content-Length; the stream is chunked. An
access line per request goes to stdout, as uvicorn's did. HTTP/1.1 as the worker's
clients (aiohttp, httpx) use it: keep-alive, request bodies with Content-Length or
chunked, ``Connection: close`` (and HTTP/1.0) honoured, ``Expect: 100-continue``
answered; a malformed request gets 400 and its connection closes. On SIGTERM or SIGINT:
``Shutting down``, the listener and connections closed (a held stream is not waited
for), ``Finished server process [PID]``, exit 0.

No uvicorn, starlette or asyncio (2026-12-02): the suite starts this ~20 times and CPU
is its budget. A start, one request and SIGTERM took 0.11 CPU-s with uvicorn (mostly its
import), 0.07 with asyncio streams (importing asyncio: 0.04); with a thread per
connection on blocking sockets, 0.03 (``python -c pass``: 0.02).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import threading
from http import HTTPStatus
from urllib.parse import unquote

LIMIT = 1 << 16  # the longest line of a request head or chunk size
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_OUT = threading.Lock()  # one line at a time from the connection threads


class BadRequest(Exception):
    """The request could not be parsed: answered 400, connection closed."""


class StandIn:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # The held streams' pipes (read end, write end): a release closes the write end.
        # A pair, not the write end alone: that number may be reused once closed.
        self.held: list[tuple[int, int]] = []
        self.cancelled = threading.Event()
        self.connections: set[socket.socket] = set()

    def connection(self, sock: socket.socket, peer) -> None:
        """Serve one connection's requests, in its own thread, until either side ends it."""
        reader, last = sock.makefile("rb"), b""
        try:
            while self._one(sock, reader, f"{peer[0]}:{peer[1]}"):
                pass
        except BadRequest:
            last = _response(400, b'{"detail": "Invalid HTTP request received."}', close=True)
        except (OSError, EOFError):
            pass  # the client went away (or the stand-in is stopping)
        except Exception:  # a bad x-status, say: uvicorn answered 500 too
            last = _response(500, b'{"detail": "Internal Server Error"}', close=True)
        with self.lock:
            self.connections.discard(sock)
        with contextlib.suppress(OSError), reader, sock:
            sock.sendall(last)

    def _one(self, sock, reader, peer: str) -> bool:
        """Read and answer one request; True if the connection stays open."""
        method, target, version, fields = _read_head(reader)
        keep = _keep_alive(version, fields.get("connection", ""))
        if fields.get("expect", "").lower() == "100-continue":
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = _read_body(reader, fields)
        raw_path, mark, query = target.partition("?")
        path = unquote(raw_path)
        access = f'INFO:     {peer} - "{method} {path}{mark}{query} {version}"'
        if path == "/v1/stream":
            _say(f"{access} 200 OK", sys.stdout)
            return self._stream(sock) and keep
        extra = ""
        if path == "/health":
            status, answer = 200, b""
        elif path.startswith("/echo/"):
            echo = {"method": method, "path": path, "query": query, "headers": fields}
            echo["body"] = body.decode(errors="replace")
            status, answer = int(fields.get("x-status", "200")), json.dumps(echo).encode()
            extra = "x-upstream: echo\r\n"
        elif path == "/release":
            with self.lock:
                for _, fd in self.held:
                    os.close(fd)  # its stream's select sees the pipe's end
                self.held.clear()  # streams started later wait for the next one
            status, answer = 200, b"{}"
        elif path == "/cancelled":
            self.cancelled.wait()
            status, answer = 200, b"{}"
        else:
            status, answer = 404, b'{"detail": "Not Found"}'
        _say(f"{access} {status} {_PHRASES.get(status, '')}".rstrip(), sys.stdout)
        sock.sendall(_response(status, answer, extra, close=not keep))
        return keep

    def _stream(self, sock: socket.socket) -> bool:
        """The SSE answer; True if it ended (False: its client went away first)."""
        pipe = os.pipe()
        wake = pipe[0]
        with self.lock:
            self.held.append(pipe)  # before the first event: a release after it counts
        try:
            head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            sock.sendall(head + b"transfer-encoding: chunked\r\n\r\n" + _chunk(b"data: first\n\n"))
            watched = [sock, wake]
            while wake not in select.select(watched, [], [])[0]:
                try:
                    more = sock.recv(1, socket.MSG_PEEK)  # left for the next request
                except OSError:
                    more = b""
                if not more:
                    self.cancelled.set()
                    return False
                watched = [wake]  # a pipelined request: it waits for this answer's end
        finally:
            with self.lock:
                if pipe in self.held:  # not released: the client went away
                    self.held.remove(pipe)
                    os.close(pipe[1])
            os.close(wake)  # last: while open, no other pipe can be the same pair
        sock.sendall(_chunk(b"data: second\n\ndata: [DONE]\n\n") + b"0\r\n\r\n")
        return True


def _say(line: str, stream) -> None:
    with _OUT:
        stream.write(line + "\n")
        stream.flush()


def _line(reader) -> bytes:
    """One line, less its end; EOFError at the end, BadRequest if cut or too long."""
    line = reader.readline(LIMIT)
    if not line.endswith(b"\n"):
        raise BadRequest if line else EOFError
    return line.rstrip(b"\r\n")


def _read_head(reader) -> tuple[str, str, str, dict[str, str]]:
    """The request line and header fields (names lower-cased; a repeated name: the last
    value). EOFError at the end of the connection."""
    first = _line(reader)
    while not first:
        first = _line(reader)  # empty lines before a request are allowed
    parts = first.decode(errors="replace").split(" ")
    if len(parts) != 3 or not parts[1] or not parts[2].startswith("HTTP/1."):
        raise BadRequest
    fields = {}
    while line := _line(reader):
        name, colon, value = line.decode(errors="replace").partition(":")
        if not colon or not name or name != name.strip():
            raise BadRequest
        fields[name.lower()] = value.strip(" \t")
    return parts[0], parts[1], parts[2], fields


def _read_body(reader, fields: dict[str, str]) -> bytes:
    if "chunked" in fields.get("transfer-encoding", "").lower():
        chunks = []
        while size := _chunk_size(_line(reader)):
            chunks.append(_exactly(reader, size))
            if _exactly(reader, 2) != b"\r\n":
                raise BadRequest
        while _line(reader):
            pass  # trailer fields
        return b"".join(chunks)
    length = fields.get("content-length", "0")
    if not length.isdigit():
        raise BadRequest
    return _exactly(reader, int(length))


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise BadRequest from None


def _exactly(reader, size: int) -> bytes:
    data = reader.read(size)
    if len(data) < size:
        raise EOFError
    return data


def _keep_alive(version: str, connection: str) -> bool:
    tokens = {token.strip() for token in connection.lower().split(",")}
    return "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _response(status: int, body: bytes, extra: str = "", *, close: bool = False) -> bytes:
    head = f"HTTP/1.1 {status} {_PHRASES.get(status, '')}\r\ncontent-type: application/json\r\n"
    head += f"{extra}content-length: {len(body)}\r\n"
    if close:
        head += "connection: close\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def serve(host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; a thread per connection."""
    stop, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)  # the signal's byte wakes the select below
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=128)
    listener.setblocking(False)  # a connection reset before accept must not block it
    standin, pid = StandIn(), os.getpid()
    shown = f"[{host}]" if ":" in host else host
    _say(
        f"INFO:     Started server process [{pid}]\n"
        "INFO:     Waiting for application startup.\n"
        "INFO:     Application startup complete.\n"
        f"INFO:     Uvicorn running on http://{shown}:{port} (Press CTRL+C to quit)",
        sys.stderr,
    )
    while stop not in select.select([listener, stop], [], [])[0]:
        try:
            sock, peer = listener.accept()
        except BlockingIOError:
            continue
        sock.setblocking(True)
        with standin.lock:
            standin.connections.add(sock)
        threading.Thread(target=standin.connection, args=(sock, peer), daemon=True).start()
    _say("INFO:     Shutting down", sys.stderr)
    listener.close()
    with standin.lock:
        for sock in standin.connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # its thread sees the end and closes it
    _say(f"INFO:     Finished server process [{pid}]", sys.stderr)


def _option(args: list[str], name: str, default: str) -> str:
    """The value of ``--name V`` or ``--name=V`` (the last one given), else ``default``."""
    value = default
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def main() -> None:
    args = sys.argv[1:]  # vLLM's flags come too: only these three are read
    if "--loading" in args:
        print("INFO Starting to load model stand-in/model...", flush=True)
        signal.pause()
        return
    print("INFO Starting vLLM stand-in", flush=True)
    serve(_option(args, "--host", "127.0.0.1"), int(_option(args, "--port", "8000")))


if __name__ == "__main__":
    sys.exit(main())
