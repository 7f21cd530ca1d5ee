"""A loopback stand-in for huggingface.co, enough for ``huggingface_hub`` and vLLM to download.

This module owns the fake hub used by tests and by ``scripts/record_vllm_fixtures.py``: it
serves model repos from local directories on 127.0.0.1 and answers the endpoints
``huggingface_hub`` 2.x calls (point ``HF_ENDPOINT`` at :attr:`HubServer.url`):

* ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``: model info (sha,
  siblings); with ``?blobs=true`` (``model_info(files_metadata=True)``) each sibling has
  ``size``, ``blobId`` and ``lfs``, and ``safetensors`` holds parameter counts by dtype
* ``GET /api/models/{repo}/tree/{rev}[/{path}]``: file listing (one page, no pagination)
* ``POST /api/models/{repo}/paths-info/{rev}``: info about given paths
* ``HEAD``/``GET /{repo}/resolve/{rev}/{file}``: file metadata and content, with
  ``X-Repo-Commit``, ``ETag`` (git blob sha1, or sha256 for LFS-like weight files, which also
  get ``X-Linked-Etag``/``X-Linked-Size``) and single ``Range`` requests.

Errors look like the real hub's: unknown repos answer 401 with ``X-Error-Code: RepoNotFound``;
files of gated repos answer 401 (no token) or 403 (a token) with ``X-Error-Code: GatedRepo``;
a missing file is 404 ``EntryNotFound``; a revision other than ``main`` or the commit sha is
404 ``RevisionNotFound`` (extra revision names can be declared). ``failing`` repos answer every
request with a given status (5xx/429 stand-ins). ``described`` files (path -> size, optional
parameter counts) are listed with their sizes but hold no data: a weight file of tens of GB
can be described without existing; if one is fetched anyway it streams zeros.
``weight_bytes_served`` counts body bytes of weight files sent, so a test can prove that
nothing was downloaded. ``hostile`` repos misbehave as a broken or hostile mirror would
(``Hostile``: model info fields replaced, answers streamed from a generator, gzip-encoded,
trickled a byte at a time, error answers that echo the request's token). Only stdlib is used, so it runs in either venv. It never contacts
anything and only logs requests to stderr when asked to.

Manual use::

    python -m tests.support.hub_server --repo tiny-org/tiny-llama=/tmp/tiny --gated ORG/NAME
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs, unquote, urlsplit

# Files the real hub stores in LFS: answered with a sha256 etag and X-Linked-* headers.
_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".onnx")
_CHUNK = 16 * 1024
_DATE = "2025-01-01T00:00:00.000Z"


@dataclass(frozen=True)
class Described:
    """A file listed with its size but not stored: ``parameters`` by safetensors dtype."""

    size: int
    parameters: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Body:
    """A raw answer body: ``chunks()`` yields it (possibly without end), sent as it comes
    with no Content-Length (the connection closes after it), ``encoding`` as the
    Content-Encoding header, ``pause_s`` slept before each chunk (a trickle)."""

    chunks: Callable[[], Iterable[bytes]]
    encoding: str | None = None
    pause_s: float = 0.0


@dataclass(frozen=True)
class Hostile:
    """How a repo misbehaves: ``info`` replaces fields of the model info (any JSON values)
    or all of it (a ``Body``); ``files`` replaces what ``resolve`` answers for some paths;
    ``echo_token`` answers every request 403 with its Authorization header in the message
    (as a careless proxy would)."""

    info: Mapping[str, object] | Body | None = None
    files: Mapping[str, Body] | None = None
    echo_token: bool = False


@dataclass(frozen=True)
class RepoFile:
    """One file of a served repo, hashed once at start (``local`` None: described only)."""

    path: str  # relative, with forward slashes
    local: Path | None
    size: int
    git_sha1: str
    sha256: str
    parameters: Mapping[str, int] | None = None  # safetensors parameter counts by dtype

    @classmethod
    def described(cls, path: str, spec: Described) -> RepoFile:
        seed = f"{path}\0{spec.size}".encode()
        return cls(
            path=path,
            local=None,
            size=spec.size,
            git_sha1=hashlib.sha1(b"described " + seed).hexdigest(),
            sha256=hashlib.sha256(seed).hexdigest(),
            parameters=dict(spec.parameters) if spec.parameters else None,
        )

    @property
    def is_lfs(self) -> bool:
        return self.path.endswith(_LFS_SUFFIXES)

    @property
    def etag(self) -> str:
        return self.sha256 if self.is_lfs else self.git_sha1

    def sibling(self) -> dict[str, object]:
        """The sibling entry of model info with ``blobs=true``."""
        entry = {"rfilename": self.path, "size": self.size, "blobId": self.git_sha1}
        return self._with_lfs(entry, sha_key="sha256")

    def tree_entry(self) -> dict[str, object]:
        entry = {"type": "file", "oid": self.git_sha1, "size": self.size, "path": self.path}
        return self._with_lfs(entry, sha_key="oid")

    def _with_lfs(self, entry: dict[str, object], sha_key: str) -> dict[str, object]:
        """``entry``, for an LFS file with its pointer under "lfs" (the sha256 as ``sha_key``)."""
        if self.is_lfs:
            entry["lfs"] = {sha_key: self.sha256, "size": self.size, "pointerSize": 134}
        return entry


@dataclass(frozen=True)
class Repo:
    """A served repo: its files and a commit sha derived from their contents."""

    repo_id: str
    files: dict[str, RepoFile]
    sha: str
    gated: bool
    revisions: frozenset[str] = frozenset()

    @classmethod
    def from_dir(
        cls,
        repo_id: str,
        root: Path | None,
        gated: bool,
        described: Mapping[str, Described] | None = None,
        revisions: Iterable[str] = (),
    ) -> Repo:
        files: dict[str, RepoFile] = {}
        locals_ = sorted(p for p in root.rglob("*") if p.is_file()) if root is not None else []
        for local in locals_:
            data = local.read_bytes()
            rel = local.relative_to(root).as_posix()
            files[rel] = RepoFile(
                path=rel,
                local=local,
                size=len(data),
                git_sha1=hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
                sha256=hashlib.sha256(data).hexdigest(),
                parameters=_safetensors_parameters(data) if rel.endswith(".safetensors") else None,
            )
        for rel, spec in (described or {}).items():
            files[rel] = RepoFile.described(rel, spec)
        digest = hashlib.sha1(repo_id.encode())
        for f in files.values():
            digest.update(f"{f.path}\0{f.git_sha1}\n".encode())
        return cls(
            repo_id=repo_id,
            files=files,
            sha=digest.hexdigest(),
            gated=gated,
            revisions=frozenset(revisions),
        )

    def parameters(self) -> dict[str, int]:
        """Parameter counts by dtype over the safetensors files vLLM would load."""
        counts: dict[str, int] = {}
        for f in self.files.values():
            for dtype, count in (f.parameters or {}).items():
                counts[dtype] = counts.get(dtype, 0) + count
        return counts

    def info(self, blobs: bool = False) -> dict[str, object]:
        return {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": self.repo_id.split("/")[0] if "/" in self.repo_id else None,
            "sha": self.sha,
            "lastModified": _DATE,
            "createdAt": _DATE,
            "private": False,
            "gated": "manual" if self.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "library_name": "transformers",
            "tags": ["transformers", "safetensors", "llama", "text-generation"],
            "pipeline_tag": "text-generation",
            "siblings": [f.sibling() if blobs else {"rfilename": p} for p, f in self.files.items()],
            "usedStorage": sum(f.size for f in self.files.values()),
            **(
                {"safetensors": {"parameters": params, "total": sum(params.values())}}
                if (params := self.parameters())
                else {}
            ),
        }


def _safetensors_parameters(data: bytes) -> dict[str, int] | None:
    """Parameter counts by dtype from a safetensors header; None if it is not one."""
    try:
        length = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + length])
    except (ValueError, UnicodeDecodeError):
        return None
    counts: dict[str, int] = {}
    for name, tensor in header.items():
        if name == "__metadata__" or not isinstance(tensor, dict):
            continue
        elements = 1
        for dim in tensor.get("shape", []):
            elements *= int(dim)
        dtype = str(tensor.get("dtype"))
        counts[dtype] = counts.get(dtype, 0) + elements
    return counts


@dataclass(frozen=True)
class Request:
    """What the server saw, for tests that assert on traffic."""

    method: str
    path: str
    status: int


class _Hub:
    """The routing and state shared by all handler threads."""

    def __init__(
        self,
        repos: Mapping[str, Repo],
        throttle_bps: int | None,
        throttle_glob: str,
        log: bool,
        failing: Mapping[str, int] | None = None,
        hostile: Mapping[str, Hostile] | None = None,
    ) -> None:
        self.repos = dict(repos)
        self.failing = dict(failing or {})
        self.hostile = dict(hostile or {})
        self.weight_bytes_served = 0
        self._count_lock = threading.Lock()
        self.throttle_bps = throttle_bps
        self.throttle_glob = throttle_glob
        self.log = log
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        # Longest ids first so "org/name" wins over a single-segment prefix.
        self._ids = sorted(self.repos, key=len, reverse=True)

    def split_repo(self, rest: str) -> tuple[str, str]:
        """Split ``org/name/tail...`` into (repo id, "/tail...")."""
        for repo_id in self._ids:
            if rest == repo_id or rest.startswith(repo_id + "/"):
                return repo_id, rest[len(repo_id) :]
        parts = rest.split("/", 2)
        repo_id = "/".join(parts[:2])
        return repo_id, rest[len(repo_id) :]


_API_TAIL = re.compile(
    r"^(?:/revision/(?P<rev>[^/]+)|/(?P<op>tree|paths-info)/(?P<trev>[^/]+)(?P<sub>/.*)?)?$"
)
_RESOLVE = re.compile(r"^/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1.0"
    # Headers and body go out in separate writes: without TCP_NODELAY each keep-alive
    # request waits ~40 ms for the client's delayed ACK, which no real hub does.
    disable_nagle_algorithm = True
    server: _Server

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def hub(self) -> _Hub:
        return self.server.hub

    def log_message(self, format: str, *args: object) -> None:
        if self.hub.log:
            sys.stderr.write(f"hub {self.address_string()} {format % args}\n")

    def _record(self, status: int) -> None:
        self.hub.requests.append(Request(self.command, self.path, status))

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self._record(status)
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self._send(
            status, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        )

    def _raw(self, body: Body) -> None:
        """Send ``body`` as it comes, then close the connection."""
        self._record(HTTPStatus.OK)
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        if body.encoding:
            self.send_header("Content-Encoding", body.encoding)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        try:
            for chunk in body.chunks():
                if body.pause_s and self.hub.stopping.wait(body.pause_s):
                    return
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return

    def _hostile(self, repo_id: str, file: str | None) -> bool:
        """Answer as the hostile repo does; False when it answers normally here."""
        hostile = self.hub.hostile.get(repo_id)
        if hostile is None:
            return False
        if hostile.echo_token:
            said = f"Access denied for {self.headers.get('Authorization', 'no token')}"
            self._json(HTTPStatus.FORBIDDEN, {"error": said}, {"X-Error-Message": said})
            return True
        if file is None and isinstance(hostile.info, Body):
            self._raw(hostile.info)
            return True
        if file is None and isinstance(hostile.info, Mapping):
            query = parse_qs(urlsplit(self.path).query)
            blobs = any(v.lower() == "true" for v in query.get("blobs", []))
            self._json(HTTPStatus.OK, {**self.hub.repos[repo_id].info(blobs), **hostile.info})
            return True
        if file is not None and file in (hostile.files or {}):
            self._raw((hostile.files or {})[file])
            return True
        return False

    def _error(self, status: int, code: str, message: str) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message}
        self._json(status, {"error": message}, headers)

    def _repo_not_found(self) -> None:
        # The real hub answers 401 (not 404) for a missing repo when no token is sent, so that
        # private repos cannot be probed; huggingface_hub maps it to RepositoryNotFoundError.
        self._error(
            HTTPStatus.UNAUTHORIZED,
            "RepoNotFound",
            "Repository not found",
        )

    def _check_revision(self, repo: Repo, rev: str) -> bool:
        if unquote(rev) in ("main", repo.sha) or unquote(rev) in repo.revisions:
            return True
        self._error(HTTPStatus.NOT_FOUND, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}")
        return False

    # -- verbs ------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(length) if length else b""
        self._dispatch()

    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        for repo_id, status in self.hub.failing.items():
            if f"/{repo_id}/" in path + "/":
                self._error(status, "Failing", f"stand-in failure {status}")
                return
        if path.startswith("/api/models/"):
            repo_id, tail = self.hub.split_repo(unquote(path[len("/api/models/") :]))
            self._api(repo_id, tail)
        elif path.startswith(("/api/", "/datasets/", "/spaces/")):
            self._error(HTTPStatus.NOT_FOUND, "NotFound", "Sorry, we can't find the page")
        else:
            repo_id, tail = self.hub.split_repo(unquote(path.lstrip("/")))
            match = _RESOLVE.match(tail)
            if match is None:
                self._error(HTTPStatus.NOT_FOUND, "NotFound", "Sorry, we can't find the page")
            else:
                self._resolve(repo_id, match["rev"], match["file"])

    # -- endpoints --------------------------------------------------------------------------
    def _api(self, repo_id: str, tail: str) -> None:
        repo = self.hub.repos.get(repo_id)
        match = _API_TAIL.match(tail)
        if match is None:
            self._error(HTTPStatus.NOT_FOUND, "NotFound", "Sorry, we can't find the page")
            return
        if repo is None:
            self._repo_not_found()
            return
        rev = match["rev"] or match["trev"] or "main"
        if not self._check_revision(repo, rev):
            return
        if match["op"] is None and self._hostile(repo_id, None):
            return
        if match["op"] == "tree":
            sub = (match["sub"] or "").strip("/")
            prefix = f"{sub}/" if sub else ""
            entries = [f.tree_entry() for p, f in repo.files.items() if p.startswith(prefix)]
            if self.command == "GET" and "recursive=true" not in (urlsplit(self.path).query or ""):
                entries = [e for e in entries if "/" not in str(e["path"])[len(prefix) :]]
            self._json(HTTPStatus.OK, entries)
        elif match["op"] == "paths-info":
            wanted = _paths_from_body(getattr(self, "_body", b""), self.headers.get("Content-Type"))
            entries = [repo.files[p].tree_entry() for p in wanted if p in repo.files]
            self._json(HTTPStatus.OK, entries)
        else:
            query = parse_qs(urlsplit(self.path).query)
            blobs = any(v.lower() == "true" for v in query.get("blobs", []))
            self._json(HTTPStatus.OK, repo.info(blobs=blobs))

    def _resolve(self, repo_id: str, rev: str, filename: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._repo_not_found()
            return
        if not self._check_revision(repo, rev):
            return
        if self._hostile(repo_id, filename):
            return
        if repo.gated:
            self._gated(repo)
            return
        entry = repo.files.get(filename)
        if entry is None:
            self._error(HTTPStatus.NOT_FOUND, "EntryNotFound", "Entry not found")
            return
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{entry.etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if entry.is_lfs:
            headers["X-Linked-Etag"] = f'"{entry.sha256}"'
            headers["X-Linked-Size"] = str(entry.size)
        start, end = 0, entry.size - 1
        status = HTTPStatus.OK
        byte_range = _parse_range(self.headers.get("Range"), entry.size)
        if byte_range is not None:
            start, end = byte_range
            status = HTTPStatus.PARTIAL_CONTENT
            headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        self._stream(entry, start, end, status, headers)

    def _gated(self, repo: Repo) -> None:
        if self.headers.get("Authorization"):
            status = HTTPStatus.FORBIDDEN
            message = (
                f"Access to model {repo.repo_id} is restricted and you are not in the authorized "
                f"list. Visit https://huggingface.co/{repo.repo_id} to ask for access."
            )
        else:
            status = HTTPStatus.UNAUTHORIZED
            message = (
                f"Access to model {repo.repo_id} is restricted. You must have access to it "
                "and be authenticated to access it. Please log in."
            )
        self._error(status, "GatedRepo", message)

    def _stream(
        self, entry: RepoFile, start: int, end: int, status: int, headers: Mapping[str, str]
    ) -> None:
        length = max(0, end - start + 1)
        self._record(status)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return
        bps = self.hub.throttle_bps
        if bps is not None and not fnmatch.fnmatch(entry.path, self.hub.throttle_glob):
            bps = None
        chunk = _CHUNK if bps is None else max(1, min(_CHUNK, bps // 10))
        began = time.monotonic()
        sent = 0
        with contextlib.ExitStack() as stack:
            fh = stack.enter_context(entry.local.open("rb")) if entry.local else None
            if fh is not None:
                fh.seek(start)
            while sent < length:
                size = min(chunk, length - sent)
                data = fh.read(size) if fh is not None else bytes(size)
                if not data:
                    break
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return
                sent += len(data)
                if entry.is_lfs:
                    with self.hub._count_lock:
                        self.hub.weight_bytes_served += len(data)
                if bps is not None:
                    # Pace to the target rate; wake early when the server is shutting down.
                    delay = began + sent / bps - time.monotonic()
                    if delay > 0 and self.hub.stopping.wait(delay):
                        self.close_connection = True
                        return


# Repository names the tests serve: one open, one gated, one the hub does not have.
OK_REPO = "tiny-org/tiny-llama"
GATED_REPO = "tiny-org/gated-llama"
MISSING_REPO = "tiny-org/does-not-exist"


def write_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """A repository folder for ``HubServer``: ``files`` maps paths in it to contents."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def _parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """A single ``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` range, clamped; else None."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes=") :].strip().partition("-")
    try:
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return None
    return (start, end) if start <= end else None


def _paths_from_body(body: bytes, content_type: str | None) -> list[str]:
    if content_type and "json" in content_type:
        paths = json.loads(body or b"{}").get("paths", [])
        return [paths] if isinstance(paths, str) else list(paths)
    return parse_qs(body.decode()).get("paths", [])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # throttled downloads must not hold up close()

    def __init__(self, address: tuple[str, int], hub: _Hub) -> None:
        self.hub = hub
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that exits with a keep-alive connection open resets it: not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class HubServer:
    """Serve ``repos`` (repo id -> local directory) on a free 127.0.0.1 port in a thread.

    A repo's directory may be None when all its files are ``described`` (repo id -> path ->
    ``Described``). ``revisions`` declares extra revision names per repo; ``failing`` maps
    repo ids to a status every request about them gets (e.g. 503, 429).
    ``gated`` repo ids answer file requests with GatedRepo errors; ``throttle_bps`` paces
    file bodies (for files matching ``throttle_glob``) so a test can watch a download in
    progress; ``log_requests`` writes one line per request to stderr. ``requests`` records
    every request as (method, path, status).
    """

    def __init__(
        self,
        repos: Mapping[str, Path | str | None],
        gated: Iterable[str] = (),
        throttle_bps: int | None = None,
        *,
        throttle_glob: str = "*",
        log_requests: bool = False,
        described: Mapping[str, Mapping[str, Described]] | None = None,
        revisions: Mapping[str, Iterable[str]] | None = None,
        failing: Mapping[str, int] | None = None,
        hostile: Mapping[str, Hostile] | None = None,
    ) -> None:
        gated_ids = set(gated)
        unknown = gated_ids - set(repos)
        if unknown:
            raise ValueError(f"gated repos not in repos: {sorted(unknown)}")
        if throttle_bps is not None and throttle_bps <= 0:
            raise ValueError("throttle_bps must be positive")
        described = described or {}
        revisions = revisions or {}
        built = {
            repo_id: Repo.from_dir(
                repo_id,
                Path(root) if root is not None else None,
                repo_id in gated_ids,
                described.get(repo_id),
                revisions.get(repo_id, ()),
            )
            for repo_id, root in repos.items()
        }
        self._hub = _Hub(built, throttle_bps, throttle_glob, log_requests, failing, hostile)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("HubServer is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[Request]:
        return list(self._hub.requests)

    @property
    def weight_bytes_served(self) -> int:
        """Body bytes of weight files (safetensors, bin, ...) sent so far."""
        return self._hub.weight_bytes_served

    def commit(self, repo_id: str) -> str:
        """The commit sha served for ``repo_id`` (the snapshot folder name in an HF cache)."""
        return self._hub.repos[repo_id].sha

    def start(self) -> HubServer:
        self._server = _Server(("127.0.0.1", 0), self._hub)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="hub-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._hub.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve local dirs as a fake Hugging Face hub.")
    parser.add_argument("--repo", action="append", default=[], metavar="ID=DIR", required=True)
    parser.add_argument("--gated", action="append", default=[], metavar="ID")
    parser.add_argument("--throttle-bps", type=int, default=None)
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    args = parser.parse_args(argv)
    repos: dict[str, Path] = {}
    for spec in args.repo:
        repo_id, sep, root = spec.partition("=")
        if not sep or not Path(root).is_dir():
            parser.error(f"--repo wants ID=DIR with an existing DIR, got {spec!r}")
        repos[repo_id] = Path(root)
    server = HubServer(
        repos, set(args.gated), args.throttle_bps, log_requests=not args.quiet
    ).start()
    print(f"HF_ENDPOINT={server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
