"""A disk cache of the ``re`` patterns the ``diagnose`` command's modules compile when
they are imported.

Python's ``re`` parses a pattern in Python code: the ~60 patterns the command's modules
compile at import took ~13 ms of a small log's ~65 ms run (the line prefixes' verbose
pattern alone 5.5 ms; 2026-12-06). What the parser makes of a pattern is plain data: the
engine's code (a list of integers), its flags and its groups. ``_sre.compile``, the C
call ``re`` itself ends with, turns that data into the same Pattern in microseconds, and
checks the code as it checks any pattern's (code it cannot run is refused). This module
stores that data for the patterns compiled while the command's modules were imported,
and on the next run puts the Patterns it rebuilds into ``re``'s own cache before those
imports, where ``re.compile`` finds them: the modules' code is unchanged.

An entry is keyed by the Python build (version and bytecode tag), its engine's version
(``_sre.MAGIC``, ``CODESIZE``) and the package's folder: another Python or another
install never reads it. Inside an entry each pattern is stored with its text and flags,
so a pattern edited since is simply not found there and ``re`` compiles it as before; a
run that compiled any pattern the entry lacked stores the entry again. Entries live with
the Hyperscan databases' (:mod:`diagnostics.pack.dbcache`: written atomically with a
CRC-32, pruned by last use, ``DIAGNOSE_CACHE=off``), in a ``re`` folder beside theirs.
``re``'s internals (``re._cache``, ``re._parser``, ``re._compiler``) are read with care:
where one is missing or differs, nothing is cached and nothing fails. The worker is one
long process and imports these modules once: only the command uses this.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # re's engine, built in: no stubs
import contextlib
import marshal
import os
import re
import sys
from collections.abc import Iterator

from diagnostics.pack import dbcache

FOLDER = "re"  # beside dbcache's "hyperscan" folder
_FORMAT = 1
# (pattern, flags as asked, flags as compiled, code, groups, groupindex, indexgroup)
Stored = tuple[str | bytes, int, int, list[int], int, dict[str, int], tuple[str | None, ...]]
CacheKey = tuple[type, str | bytes, int]


def entry_path() -> str | None:
    """Where this Python's and this install's entry is, or None (the cache is off)."""
    hyperscan = dbcache.cache_dir()
    if hyperscan is None:
        return None
    digest = dbcache.hasher()
    for part in (
        str(_FORMAT),
        sys.version,
        str(sys.implementation.cache_tag),
        str(_sre.MAGIC),
        str(_sre.CODESIZE),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return os.path.join(os.path.dirname(hyperscan), FOLDER, f"{digest.hexdigest()}.re")


@contextlib.contextmanager
def prefilled(path: str | None) -> Iterator[None]:
    """Within the block, ``re.compile`` finds the patterns of the entry at ``path``
    already compiled; after it, the entry is stored again if the block compiled a pattern
    the entry lacked. None: nothing is done."""
    cache = getattr(re, "_cache", None)
    if path is None or not isinstance(cache, dict):
        yield
        return
    payload = dbcache.read_entry(path)
    loaded = rebuilt(payload) if payload is not None else {}
    for key, pattern in loaded.items():
        cache.setdefault(key, pattern)
    yield
    compiled = [key for key in cache if _storable(key)]
    if any(key not in loaded for key in compiled):
        stored = encoded(compiled)
        if stored is not None:
            dbcache.write_entry(os.path.dirname(path), os.path.basename(path), stored)


def _storable(key: object) -> bool:
    return (
        isinstance(key, tuple)
        and len(key) == 3
        and key[0] in (str, bytes)
        and isinstance(key[1], key[0])
        and type(key[2]) is int
    )


def encoded(keys: list[CacheKey]) -> bytes | None:
    """The entry holding each pattern of ``keys`` (``re``'s cache keys: type, pattern,
    flags) as ``re`` compiles it; None when this Python's ``re`` cannot be read so."""
    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]

        stored: list[Stored] = []
        for _, pattern, flags in keys:
            parsed = _parser.parse(pattern, flags)
            state = parsed.state
            groupindex = {str(name): int(index) for name, index in state.groupdict.items()}
            indexgroup: list[str | None] = [None] * state.groups
            for name, index in groupindex.items():
                indexgroup[index] = name
            code = [int(word) for word in _compiler._code(parsed, flags)]
            flags, compiled = int(flags), int(flags | state.flags)
            groups = state.groups - 1
            stored.append((pattern, flags, compiled, code, groups, groupindex, tuple(indexgroup)))
        return marshal.dumps((_FORMAT, stored))
    except Exception:  # re's internals differ here: nothing is cached
        return None


def rebuilt(payload: bytes) -> dict[CacheKey, re.Pattern[str] | re.Pattern[bytes]]:
    """The Patterns of an entry, keyed as ``re`` keys its cache; empty when the entry
    cannot be read or its code is refused (then ``re`` compiles every pattern itself)."""
    try:
        form, stored = marshal.loads(payload)
        if form != _FORMAT:
            return {}
        patterns: dict[CacheKey, re.Pattern[str] | re.Pattern[bytes]] = {}
        for pattern, flags, compiled, code, groups, groupindex, indexgroup in stored:
            patterns[(type(pattern), pattern, flags)] = _sre.compile(
                pattern, compiled, code, groups, groupindex, indexgroup
            )
        return patterns
    except Exception:  # a foreign or damaged entry: compiled as before
        return {}
