"""A disk cache of compiled Hyperscan databases.

Compiling the rule pack's prefilter takes 0.1-0.5 s; reading it back takes a few
milliseconds. That is most of what ``diagnose`` spends on a small log, and part of
every worker start. An entry is keyed by a hash of everything the compiled database
depends on: the expressions exactly as compiled, their ids and flags, the mode,
Hyperscan's version and the machine type. A changed pack gives another key, so an
entry can never stand for a different pack.

Entries are written atomically (a temporary file in the same folder, then a rename)
with a header holding the payload's length and CRC-32; a short, corrupt or foreign
entry is ignored and compiled afresh, and Hyperscan itself refuses a database built
for another version or for CPU features this machine lacks (a database's CRC is
Hyperscan's own: it checks its bytecode's when it loads it). The folder is
``$XDG_CACHE_HOME/runpod-vllm-worker/hyperscan`` (``~/.cache`` when unset). A process
compiles under a lock on the folder (``compile.lock``, ``filelock``), after looking for
the entry once more: processes started together on an empty cache compile each database
once (a worker's four test processes each compiled the shipped pack's, 0.7 s apiece,
2026-12-02). When it
cannot be created, read or written, nothing is cached and nothing fails: the
database is compiled as before. ``DIAGNOSE_CACHE=off`` turns the cache off.

The folder is shared by every install and every pack of the user (each pack makes
about seven entries: its own prefilter and the block scan's databases), so it is
pruned by last use, not by age: an entry read is marked used (its mtime, at most once
an hour), and when more than ``_KEEP`` entries of a kind are stored the least recently
used go. Pruning by write time removed the entries every run reads as soon as a few
other packs (an edited pack, a test's) were written after them, and the next run
compiled them again: seconds, with the catalogue of ``rules/85-catalogue.yaml``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import hyperscan

if TYPE_CHECKING:
    from typing import TypeAlias

    StrPath: TypeAlias = str | os.PathLike[str]

try:  # hashlib's own BLAKE2: importing hashlib loads OpenSSL (~2.5 ms of a small log's run)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

_MAGIC = b"hsdbcache1\n"
_HEADER = struct.Struct("<QI")  # payload length, CRC-32
_KEEP = 64  # entries of a kind kept; the least recently used go when a new one is written
_TOUCH_AFTER = 3600.0  # seconds: an entry read is marked used when its mark is older
_COMPILE_WAIT_S = 60.0  # at most this long for another process's compile (see _compiling)


def cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Where entries live (an absolute path), or None when the cache is turned off.
    Paths here are strings: pathlib's import (with urllib.parse and ipaddress) is ~4 ms
    of a small log's run."""
    if env.get("DIAGNOSE_CACHE", "").lower() in ("0", "off", "false", "no"):
        return None
    base = env.get("XDG_CACHE_HOME") or ""
    root = base if os.path.isabs(base) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "runpod-vllm-worker", "hyperscan")


def hasher(data: bytes = b"") -> blake2b:
    """The hash of cache keys: 256-bit BLAKE2b (as collision-resistant as SHA-256)."""
    return blake2b(data, digest_size=32)


def key(expressions: Sequence[bytes], ids: Sequence[int], flags: Sequence[int], mode: int) -> str:
    digest = hasher()
    for part in (
        _MAGIC,
        str(getattr(hyperscan, "__version__", "")).encode(),
        os.uname().machine.encode() if hasattr(os, "uname") else b"",
        str(mode).encode(),
    ):
        digest.update(part + b"\0")
    # One update of the whole list: hundreds of small updates cost more than the hashing.
    digest.update(
        b"".join(
            b"%d:%d:%d:%b" % (pattern_id, flag, len(expression), expression)
            for expression, pattern_id, flag in zip(expressions, ids, flags, strict=True)
        )
    )
    return digest.hexdigest()


def load_or_compile(
    name: str,
    mode: int,
    compile_database: Callable[[], hyperscan.Database],
    folder: StrPath | None = None,
) -> hyperscan.Database:
    """The database stored under ``name`` (a :func:`key`), else ``compile_database()``,
    which is then stored for next time. ``folder``: default :func:`cache_dir`."""
    folder = cache_dir() if folder is None else folder
    if folder is None:
        return compile_database()
    path = os.path.join(folder, f"{name}.hsdb")
    database = _read(path, mode)
    if database is not None:
        return database
    with _compiling(folder):  # another process may be compiling it: read what it wrote
        database = _read(path, mode)
        if database is None:
            database = compile_database()
            write_entry(folder, f"{name}.hsdb", hyperscan.dumpb(database))
    return database


@contextlib.contextmanager
def _compiling(folder: StrPath) -> Iterator[None]:
    """Held while this process compiles a database for the folder, so that processes
    started together on an empty cache (a worker's test processes, several ``diagnose``
    runs) compile each database once: the others wait, then read it. Waited for at most
    ``_COMPILE_WAIT_S``, then the database is compiled anyway; a folder where the lock
    cannot be made is not locked."""
    from filelock import FileLock, Timeout  # only a cache miss needs it

    try:
        lock = FileLock(os.path.join(folder, "compile.lock"), timeout=_COMPILE_WAIT_S)
        lock.acquire()
    except (Timeout, OSError):
        yield
        return
    try:
        yield
    finally:
        lock.release()


def read_entry(path: StrPath, *, crc: bool = True) -> bytes | None:
    """The payload stored at ``path``; None when missing, short, corrupt or foreign.
    An entry read is marked used (see the module's docstring). ``crc=False``: its CRC-32
    is not checked (the reader checks the payload itself)."""
    start = len(_MAGIC) + _HEADER.size
    try:
        # The header, then the payload read whole into its own bytes: no copy of the
        # payload (~1.5 MB, a database) made from the file's bytes. Unbuffered: read once.
        with open(path, "rb", buffering=0) as entry:
            head = entry.read(start)
            if len(head) < start or not head.startswith(_MAGIC):
                return None
            payload = entry.read()
            used = os.fstat(entry.fileno()).st_mtime
    except OSError:
        return None
    length, stored_crc = _HEADER.unpack_from(head, len(_MAGIC))
    if len(payload) != length or (crc and zlib.crc32(payload) != stored_crc):
        return None
    if time.time() - used > _TOUCH_AFTER:
        with contextlib.suppress(OSError):  # a read-only cache is still read
            os.utime(path)
    return payload


def _read(path: StrPath, mode: int) -> hyperscan.Database | None:
    # Hyperscan checks a database's own CRC-32 of its bytecode when it loads one (a bit
    # flipped anywhere in it is refused): a second checksum of the ~4 MB a small log's
    # run reads would cost ~1.3 ms. The length is still checked.
    payload = read_entry(path, crc=False)
    if payload is None:
        return None
    try:
        database = hyperscan.loadb(payload, mode)
        database.scratch = hyperscan.Scratch(database)
    except hyperscan.error:
        return None
    return database


def write_entry(folder: StrPath, name: str, payload: bytes) -> None:
    """Store ``payload`` as ``folder/name`` atomically; any OSError: nothing stored."""
    import tempfile  # only when writing: importing it costs more than a cache hit

    temporary = None
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=".tmp-", delete=False) as out:
            temporary = out.name
            out.write(_MAGIC + _HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        os.replace(temporary, os.path.join(folder, name))
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return
    _prune(folder, os.path.splitext(name)[1])


def _prune(folder: StrPath, suffix: str) -> None:
    """Keep the ``_KEEP`` most recently used entries whose names end in ``suffix`` (one
    of a kind: ``.hsdb``), not counting hidden ones (a temporary file being written)."""
    try:
        with os.scandir(folder) as found:
            entries = [
                (entry.stat().st_mtime, entry.path)
                for entry in found
                if entry.name.endswith(suffix) and not entry.name.startswith(".")
            ]
        for _, old in sorted(entries, reverse=True)[_KEEP:]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)
    except OSError:
        pass
