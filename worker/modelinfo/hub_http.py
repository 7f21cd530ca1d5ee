"""One GET against the hub, read whole and bounded (``HubClient``).

* by its **decoded** size (``limit``; a gzip answer is inflated with a cap, never whole;
  an error answer's body at most ``MAX_ERROR_BYTES``) and the model info by its number
  of files (``MAX_FILES``);
* in **time**: every byte read before the client's ``deadline``; a hub that trickles
  its answer is cut off there.

An answer that cannot be used (too large, too slow, not JSON) raises ``NoAnswer``; an
HTTP error answer raises ``HubError`` with the hub's error code and message, which
``worker.modelinfo.hub`` reads as a refusal or an unknown.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
import zlib
from typing import Any

from worker.modelinfo.local import loads

MAX_ERROR_BYTES = 16 << 10  # the body of an error answer (only its message is read)
_CHUNK = 64 << 10


class NoAnswer(Exception):
    """A hub answer that cannot be used: too large, too slow, not JSON, implausible."""


class HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _decoder(encoding: str) -> Any:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, detected
    raise NoAnswer(f"content encoding {encoding!r} not accepted")


def _read_body(response: Any, limit: int, deadline: float, what: str) -> bytes:
    """The body, decoded, of at most ``limit`` bytes, read before ``deadline``."""
    decoder = _decoder(response.headers.get("content-encoding", ""))
    out = bytearray()

    def add(data: bytes) -> None:
        out.extend(data)
        if len(out) > limit:
            raise NoAnswer(f"{what} is larger than {limit >> 20} MiB (decoded)")

    for raw in response.iter_raw(_CHUNK):
        if time.monotonic() > deadline:
            raise NoAnswer(f"{what} was still arriving at the deadline")
        if decoder is None:
            add(raw)
            continue
        try:
            add(decoder.decompress(raw, limit + 1 - len(out)))
            while decoder.unconsumed_tail:
                add(decoder.decompress(decoder.unconsumed_tail, limit + 1 - len(out)))
        except zlib.error as exc:
            raise NoAnswer(f"{what}: bad compressed data ({exc})") from None
    if decoder is not None:
        add(decoder.flush())
    return bytes(out)


def _error_of(response: Any, deadline: float) -> HubError:
    code = response.headers.get("x-error-code")
    message = response.headers.get("x-error-message") or ""
    if not message:
        try:
            body = _read_body(response, MAX_ERROR_BYTES, deadline, "error answer")
            data = loads(body)
            message = str(data.get("error", "")) if isinstance(data, dict) else ""
        except (NoAnswer, ValueError):
            message = ""
    message = " ".join(message.split())[:500]
    return HubError(response.status_code, code, message)


@functools.cache
def _tls(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The TLS context of the hub clients of this process, per CA setting: the CA bundle
    (certifi's, or SSL_CERT_FILE / SSL_CERT_DIR, which httpx reads from the environment;
    the arguments are those two settings, as the cache's key) costs ~21 ms of CPU to
    load, once instead of per client."""
    import httpx

    return httpx.create_ssl_context()


class HubClient:
    """GETs against the hub, each read whole (bounded) before ``deadline``."""

    def __init__(self, endpoint: str, headers: dict[str, str], deadline: float):
        import httpx

        self.endpoint, self.deadline = endpoint, deadline
        left = max(0.1, deadline - time.monotonic())
        self.client = httpx.Client(
            verify=_tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
            headers={**headers, "Accept-Encoding": "identity"},
            timeout=httpx.Timeout(left),
            follow_redirects=True,
            max_redirects=5,
        )

    def get_json(self, path: str, limit: int, what: str, params: dict | None = None) -> Any:
        from worker.modelinfo.schema import MAX_FILES  # pydantic: loaded when first needed

        with self.client.stream("GET", self.endpoint + path, params=params) as response:
            if response.status_code >= 400:
                raise _error_of(response, self.deadline)
            body = _read_body(response, limit, self.deadline, what)
        if what == "model info" and body.count(b'"rfilename"') > MAX_FILES:
            raise NoAnswer(f"model info lists more than {MAX_FILES} files")
        try:
            return loads(body)
        except ValueError as exc:
            raise NoAnswer(f"{what} is not JSON ({exc})") from None

    def close(self) -> None:
        self.client.close()
