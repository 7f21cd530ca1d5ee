"""Read a model's metadata from the Hugging Face Hub without downloading weights.

The hub (or a mirror at ``HF_ENDPOINT``) is untrusted input. Three requests at most: the
model info with file sizes (``/api/models/{repo}[/revision/{rev}]?blobs=true``), the
``config.json`` bytes and, when vLLM would read one, the safetensors index; all read
into memory (nothing is written to the cache), each bounded:

* by its **decoded** size (``MAX_INFO_BYTES``, ``MAX_CONFIG_BYTES``, ``MAX_INDEX_BYTES``;
  a gzip answer is inflated with a cap, never whole) and the model info by its number of
  files (``MAX_FILES``);
* in **time**, all requests together: ``timeout`` seconds from the first byte asked to
  the last byte read; a hub that trickles its answer is cut off there;
* by **type and range**: the model info and the config are checked against the schema in
  ``worker.modelinfo.facts``.

A definite answer of the hub (401/403 gated, repo or revision not found) is returned as
a ``HubRefusal``; anything else (too large, too slow, malformed, implausible, 5xx, 429,
no connection) is a ``HubUnknown``: the launch goes ahead and vLLM decides. Texts from
the hub are returned as the hub wrote them: the caller redacts them (the secret rule is
``diagnostics.redaction``) before they are shown.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from worker.modelinfo.facts import (
    MAX_FILES,
    MISTRAL_INDEX,
    SAFE_INDEX,
    ModelFacts,
    check_index,
    check_listing,
    clean_config,
)
from worker.modelinfo.local import MAX_CONFIG_BYTES, MAX_INDEX_BYTES, loads

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_INFO_BYTES = 8 << 20  # model info with blobs: ~200 bytes a file, MAX_FILES of them
MAX_ERROR_BYTES = 16 << 10  # the body of an error answer (only its message is read)
_CHUNK = 64 << 10


@dataclass(frozen=True)
class HubRefusal:
    """The hub said no, for sure: ``kind`` is gated, repo-not-found or revision-not-found."""

    kind: str
    detail: str


@dataclass(frozen=True)
class HubUnknown:
    """The hub could not give an answer (slow, unreachable, too large, malformed...)."""

    detail: str


class _NoAnswer(Exception):
    """A hub answer that cannot be used: too large, too slow, not JSON, implausible."""


class _HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _decoder(encoding: str) -> Any:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, detected
    raise _NoAnswer(f"content encoding {encoding!r} not accepted")


def _read_body(response: Any, limit: int, deadline: float, what: str) -> bytes:
    """The body, decoded, of at most ``limit`` bytes, read before ``deadline``."""
    decoder = _decoder(response.headers.get("content-encoding", ""))
    out = bytearray()

    def add(data: bytes) -> None:
        out.extend(data)
        if len(out) > limit:
            raise _NoAnswer(f"{what} is larger than {limit >> 20} MiB (decoded)")

    for raw in response.iter_raw(_CHUNK):
        if time.monotonic() > deadline:
            raise _NoAnswer(f"{what} was still arriving at the deadline")
        if decoder is None:
            add(raw)
            continue
        try:
            add(decoder.decompress(raw, limit + 1 - len(out)))
            while decoder.unconsumed_tail:
                add(decoder.decompress(decoder.unconsumed_tail, limit + 1 - len(out)))
        except zlib.error as exc:
            raise _NoAnswer(f"{what}: bad compressed data ({exc})") from None
    if decoder is not None:
        add(decoder.flush())
    return bytes(out)


def _error_of(response: Any, deadline: float) -> _HubError:
    code = response.headers.get("x-error-code")
    message = response.headers.get("x-error-message") or ""
    if not message:
        try:
            body = _read_body(response, MAX_ERROR_BYTES, deadline, "error answer")
            data = loads(body)
            message = str(data.get("error", "")) if isinstance(data, dict) else ""
        except (_NoAnswer, ValueError):
            message = ""
    message = " ".join(message.split())[:500]
    return _HubError(response.status_code, code, message)


class _Client:
    """GETs against the hub, each read whole (bounded) before ``deadline``."""

    def __init__(self, endpoint: str, headers: dict[str, str], deadline: float):
        import httpx

        self.endpoint, self.deadline = endpoint, deadline
        left = max(0.1, deadline - time.monotonic())
        self.client = httpx.Client(
            headers={**headers, "Accept-Encoding": "identity"},
            timeout=httpx.Timeout(left),
            follow_redirects=True,
            max_redirects=5,
        )

    def get_json(self, path: str, limit: int, what: str, params: dict | None = None) -> Any:
        with self.client.stream("GET", self.endpoint + path, params=params) as response:
            if response.status_code >= 400:
                raise _error_of(response, self.deadline)
            body = _read_body(response, limit, self.deadline, what)
        if what == "model info" and body.count(b'"rfilename"') > MAX_FILES:
            raise _NoAnswer(f"model info lists more than {MAX_FILES} files")
        try:
            return loads(body)
        except ValueError as exc:
            raise _NoAnswer(f"{what} is not JSON ({exc})") from None

    def close(self) -> None:
        self.client.close()


def _refusal(exc: _HubError, revision: str | None, what: str) -> HubRefusal | HubUnknown:
    """The hub's error answer, read as huggingface_hub's hf_raise_for_status reads it."""
    said = f"{exc.status} {exc.code or 'error'}" + (f": {exc.message}" if exc.message else "")
    if exc.code == "GatedRepo":
        return HubRefusal("gated", said)
    if exc.code == "RevisionNotFound":
        return HubRefusal("revision-not-found", f"revision {revision!r}: {said}")
    if exc.code == "RepoNotFound":
        return HubRefusal("repo-not-found", said)
    if exc.code == "EntryNotFound" or (exc.status == 404 and what != "model info"):
        return HubUnknown(f"no {what}: {said}")
    if (
        exc.status == 401
        and what == "model info"
        and exc.message != "Invalid credentials in Authorization header"
    ):
        return HubRefusal("repo-not-found", said)  # the hub's answer for a missing repo
    if exc.status in (401, 403):  # a refusal without the hub's error code: access denied
        return HubRefusal("gated", said)
    return HubUnknown(f"HTTP {said}")


def _read(
    client: _Client, repo_id: str, revision: str | None
) -> ModelFacts | HubRefusal | HubUnknown:
    repo = quote(repo_id, safe="/")
    path = f"/api/models/{repo}"
    if revision:
        path += f"/revision/{quote(revision, safe='')}"
    try:
        data = client.get_json(path, MAX_INFO_BYTES, "model info", {"blobs": "true"})
    except _HubError as exc:
        return _refusal(exc, revision, "model info")
    try:
        listing = check_listing(data)
    except ValueError as exc:
        raise _NoAnswer(f"the model info is not plausible ({exc})") from None
    files = {s.rfilename: int(s.size or 0) for s in listing.siblings}
    parameters = (
        dict(listing.safetensors.parameters)
        if listing.safetensors and listing.safetensors.parameters
        else None
    )
    rev = quote(listing.sha or revision or "main", safe="")
    problems: list[str] = []

    def fetch(name: str, limit: int) -> Any:
        try:
            return client.get_json(f"/{repo}/resolve/{rev}/{quote(name)}", limit, name)
        except _HubError as exc:
            answer = _refusal(exc, revision, name)
            if isinstance(answer, HubRefusal):
                raise _Refused(answer) from None
            problems.append(answer.detail)
        except _NoAnswer as exc:
            problems.append(str(exc))
        return None

    config: dict[str, Any] | None = None
    try:
        if "config.json" in files:
            config, bad = clean_config(fetch("config.json", MAX_CONFIG_BYTES))
            problems += bad
        indexes = {}
        for name in (SAFE_INDEX, MISTRAL_INDEX):
            if name in files:
                names = check_index(fetch(name, MAX_INDEX_BYTES))
                if names is not None:
                    indexes[name] = names
    except _Refused as refused:
        return refused.answer
    return ModelFacts(
        source="hub",
        config=config,
        files=files,
        parameters=parameters,
        indexes=indexes,
        problems=tuple(problems),
    )


class _Refused(Exception):
    def __init__(self, answer: HubRefusal):
        super().__init__(answer.detail)
        self.answer = answer


def _in_thread(work: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
    """Run ``work`` in a daemon thread for at most ``timeout`` seconds: (done, result)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="preflight-hub", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box.get("result")


def read_hub(
    repo_id: str,
    revision: str | None,
    *,
    endpoint: str | None,
    token: str | None,
    timeout: float,
) -> ModelFacts | HubRefusal | HubUnknown:
    """Model info (file sizes, safetensors parameter counts), config.json and the index
    of a repo, all within ``timeout`` seconds in total."""
    from huggingface_hub.utils import build_hf_headers

    endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    deadline = time.monotonic() + timeout
    try:
        # token=False: never a token saved on this machine.
        headers = build_hf_headers(token=token or False)
    except Exception as exc:
        return HubUnknown(f"{type(exc).__name__}: {exc}")

    def work() -> ModelFacts | HubRefusal | HubUnknown:
        client = _Client(endpoint, headers, deadline)
        try:
            return _read(client, repo_id, revision)
        finally:
            client.close()

    try:
        done, answer = _in_thread(work, timeout)
    except _NoAnswer as exc:
        return HubUnknown(str(exc))
    except Exception as exc:  # transport errors, timeouts, bad URLs
        first = (str(exc).strip().splitlines() or [""])[0]
        return HubUnknown(f"{type(exc).__name__}: {first}".rstrip(": "))
    if not done:
        return HubUnknown(f"no whole answer within {timeout:g} s (PREFLIGHT_TIMEOUT)")
    return answer


def download_bytes(
    repo_id: str, revision: str | None, endpoint: str | None, token: str | None
) -> int | None:
    """What vLLM will download of the repo (one weight format, config and tokenizer
    files), from the hub's metadata read with the same bounds as the pre-flight; None
    when unknown. For the download's progress events: a nicety, never a verdict."""
    facts = read_hub(repo_id, revision, endpoint=endpoint, token=token, timeout=10)
    if not isinstance(facts, ModelFacts):
        return None
    fetched = facts.download_files()
    return sum(fetched.values()) or None if fetched else None
