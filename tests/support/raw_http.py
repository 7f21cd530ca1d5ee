"""HTTP/1.1 over a bare socket, for tests that send what no client library would send:
an answer read whole (``read_answer``) and its status (``status_of``)."""

from __future__ import annotations

import contextlib
import socket


def read_answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes (or ``timeout``)."""
    sock.settimeout(timeout)
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes) -> int | None:
    """The status of an HTTP/1.1 answer; None when ``answer`` is not one."""
    if not answer.startswith(b"HTTP/1.1 "):
        return None
    return int(answer[9:12])
