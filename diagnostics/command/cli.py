"""``diagnose``: triage vLLM startup logs offline. The console script's entry: it decides
where the command's bytecode comes from, then runs the command's body
(:mod:`diagnostics.command.diagnose`: arguments, exit codes, output).

Bytecode: when Python may not write bytecode (``PYTHONDONTWRITEBYTECODE``, ``-B``) and
none was written beside this module (an editable install or a checkout; ``pip install``
of a wheel writes it at install time), or what was written there is older than this
module's source (a checkout edited since), every run would compile the package's source
again: ~30 ms of a small log's ~60. Then the modules this command imports are read from,
and the first time written to, ``$XDG_CACHE_HOME/runpod-vllm-worker/bytecode``
(``sys.pycache_prefix``), never beside the source; ``DIAGNOSE_CACHE=off`` turns that off
with the rest of the cache (:mod:`diagnostics.pack.dbcache`). This module is the one
compiled on every run (it decides, so it cannot use the cache): it is kept small, and
``diagnostics/__init__`` imports nothing.

Patterns: the ~60 ``re`` patterns those modules compile when imported (~13 ms of the
same run) are read back from the cache too (:mod:`diagnostics.pack.regexcache`).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

BYTECODE = "bytecode"  # the folder beside dbcache's, under runpod-vllm-worker/


def main(argv: list[str] | None = None, *, tune_memory: bool = False) -> int:
    """:func:`diagnostics.command.diagnose.main`, its modules' bytecode in the cache
    folder when Python's own place will not do (see the module's docstring)."""
    bytecode = _BytecodeIn(bytecode_dir())
    with bytecode:
        from diagnostics.command import diagnose
    return diagnose.main(argv, tune_memory=tune_memory, bytecode=_imports(bytecode))


def run() -> int:
    """Console-script entry: :func:`diagnostics.command.diagnose.run`, its modules'
    bytecode as for :func:`main`."""
    bytecode = _BytecodeIn(bytecode_dir())
    with bytecode:
        from diagnostics.command import diagnose
    return diagnose.run(_imports(bytecode))


@contextmanager
def _imports(bytecode: _BytecodeIn) -> Iterator[None]:
    """Where the command's modules are imported: their bytecode in ``bytecode``'s folder,
    and the patterns they compile read from the cache where stored there before
    (:mod:`diagnostics.pack.regexcache`)."""
    with bytecode:
        from diagnostics.pack import regexcache

        with regexcache.prefilled(regexcache.entry_path()):
            yield


def bytecode_dir(env: Mapping[str, str] = os.environ) -> str | None:
    """The folder for this command's bytecode, or None: Python's own place will do
    (bytecode may be written, or what was written beside this module is current), or
    the cache is off. The root is :func:`diagnostics.pack.dbcache.cache_dir`'s, found
    without importing that module (it would be compiled from source first)."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    cached = globals().get("__cached__")
    if cached and os.path.exists(cached) and not _stale(cached, __file__):
        return None
    if env.get("DIAGNOSE_CACHE", "").lower() in ("0", "off", "false", "no"):
        return None
    base = env.get("XDG_CACHE_HOME") or ""
    root = base if os.path.isabs(base) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "runpod-vllm-worker", BYTECODE)


def _stale(cached: str, source: str) -> bool:
    """Whether ``cached`` is this Python's bytecode of an older ``source`` (its header's
    modification time or size differ, as Python checks them): Python then compiles the
    source on every run and, not allowed to write, never replaces it. Anything else (a
    current file, a hash-checked one, one that cannot be read) is left to Python."""
    from importlib.util import MAGIC_NUMBER  # imported by the command anyway

    try:
        with open(cached, "rb") as file:
            header = file.read(16)
        stat = os.stat(source)
    except OSError:
        return False
    if len(header) < 16 or header[:4] != MAGIC_NUMBER or int.from_bytes(header[4:8], "little"):
        return False
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    return (mtime, size) != (int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF)


class _BytecodeIn:
    """Within the block, modules imported for the first time keep their bytecode under
    ``folder`` (read from it, written to it when missing or stale); None: no change."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.saved: tuple[str | None, bool] = (sys.pycache_prefix, sys.dont_write_bytecode)

    def __enter__(self) -> None:
        self.saved = (sys.pycache_prefix, sys.dont_write_bytecode)
        if self.folder is not None:
            sys.pycache_prefix, sys.dont_write_bytecode = self.folder, False

    def __exit__(self, *exc: object) -> None:
        sys.pycache_prefix, sys.dont_write_bytecode = self.saved


def __getattr__(name: str) -> object:
    """The body's other names (``arguments``, ``Arguments``, ``EXIT_OK``...), as they were
    importable from here."""
    if name.startswith("__"):
        raise AttributeError(name)
    from diagnostics.command import diagnose

    return getattr(diagnose, name)


if __name__ == "__main__":
    sys.exit(run())
