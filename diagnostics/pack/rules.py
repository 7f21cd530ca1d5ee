"""Load and validate the rule pack (``rules/*.yaml``).

A pack is a folder of YAML files read in file-name order; file order, then order
inside a file, is priority: when several rules match a log, the earliest rule wins.
Each file may hold ``rules:`` (failure rules) and ``phases:`` (progress markers).
Everything is checked on load; a broken pack raises one :class:`RulePackError`
naming the file, the rule and the field. Every pattern must compile in RE2 (which
runs every match and capture in linear time) and in Hyperscan (the multi-pattern
prefilter); see :mod:`diagnostics.pack.matching`. Message templates may only name the
rule's captures (``{name}``: no format spec or conversion, captures are text), and a
mapping that repeats a key (``patterns:`` twice) is an error, not a silent override.

A pack that passed validation is stored in the disk cache of :mod:`diagnostics.pack.dbcache`
(the parsed YAML, as ``marshal`` data), keyed by a hash of the pack files' names and
bytes, the source of the modules that judge a pack (this one, pack, packcheck,
evidence, model, matching) and the RE2 and Hyperscan builds. A later load of the same
pack reads it back: no YAML parse, no checks again, and RE2 compiles each pattern on
its first use (each pattern's named groups are stored with the pack: reading them
compiles nothing). The pack's key also keys the Hyperscan databases built from all its
patterns (:attr:`RulePack.key`).
A pack not found there is read and validated in full, as always.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
from typing import TYPE_CHECKING

import hyperscan
import re2

from diagnostics.pack import dbcache
from diagnostics.pack.matching import prefilter_form
from diagnostics.pack.pack import (
    PHASES,
    TRACEBACK_BODY,
    TRACEBACK_START,
    Pattern,
    Phase,
    Rule,
    RulePack,
    RulePackError,
)
from diagnostics.pack.packcheck import _build, _parse
from diagnostics.pack.templates import template_fields

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable
    from pathlib import Path

# The pack's values and its validation live in diagnostics.pack.pack and
# diagnostics.pack.packcheck; they stay importable from here.
__all__ = [
    "PHASES",
    "TRACEBACK_BODY",
    "TRACEBACK_START",
    "Pattern",
    "Phase",
    "Rule",
    "RulePack",
    "RulePackError",
    "default_rules_dir",
    "load_pack",
    "template_fields",
]


def default_rules_dir() -> Traversable:
    """The pack shipped with the project, read as package data (``diagnostics.rulepack``).

    A Traversable, not a path: installed from a wheel, an sdist or in editable mode the
    package may be a namespace package (a ``MultiplexedPath``), whose ``str()`` is no
    file name. A checkout that is not installed at all reads ``rules/`` beside the code.
    """
    root = shipped_rules()
    if isinstance(root, str):
        from pathlib import Path

        return Path(root)
    return root


def shipped_rules() -> str | Traversable:
    """:func:`default_rules_dir` as its one plain folder's path where it is one (the usual
    case): read with ``os``, without importing pathlib (with urllib.parse and ipaddress,
    ~4 ms of a small log's run) or importlib.resources (~5 ms)."""
    try:
        spec = importlib.util.find_spec("diagnostics.rulepack")
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        return os.path.join(os.path.dirname(here), "rules")
    folders = list(spec.submodule_search_locations or ())
    if len(folders) == 1 and os.path.isdir(folders[0]):
        return str(folders[0])
    from importlib import resources

    return resources.files("diagnostics.rulepack")


def load_pack(path: Path | str | Traversable | None = None) -> RulePack:
    """Read every ``*.yaml`` in ``path`` (a folder) or the one file ``path`` names."""
    root: str | Traversable
    if path is None:
        root = shipped_rules()
    elif isinstance(path, (str, os.PathLike)):
        root = os.fspath(path)
    else:
        root = path
    sources = _sources(root)
    folder = dbcache.cache_dir()
    name = _pack_key(sources) if folder is not None else None
    if folder is not None and name is not None:
        cached = _cached_docs(os.path.join(folder, f"{name}.pack"))
        if cached is not None:
            docs, groups = cached
            return _build(docs, root, trusted=True, key=name, groups=groups)
    docs = [(file_name, _parse(file_name, data)) for file_name, data in sources]
    pack = _build(docs, root, trusted=False, key=name)
    if folder is not None and name is not None:
        # The named groups of each pattern that has some: reading them from a cached
        # pack compiles nothing.
        groups = {p.regex.pattern: p.regex.groupindex for p in pack.patterns if p.regex.groupindex}
        try:
            payload = marshal.dumps([_PACK_FORMAT, [_stored(doc) for doc in docs], groups])
        except ValueError:  # a YAML value marshal cannot hold (a date in a note): not cached
            return pack
        dbcache.write_entry(folder, f"{name}.pack", payload)
    return pack


def _sources(root: str | Traversable) -> list[tuple[str, bytes]]:
    """The pack's files, (name, bytes) in file-name order: every ``*.yaml`` of the folder
    ``root``, or the one file it names."""
    entries: list[tuple[str, str | Traversable]] | None
    if isinstance(root, str):
        if os.path.isdir(root):
            with os.scandir(root) as found:
                entries = [
                    (e.name, e.path) for e in found if e.name.endswith(".yaml") and e.is_file()
                ]
        else:
            entries = [(os.path.basename(root), root)] if os.path.isfile(root) else None
    elif root.is_dir():
        entries = [(f.name, f) for f in root.iterdir() if f.name.endswith(".yaml") and f.is_file()]
    else:
        entries = [(root.name, root)] if root.is_file() else None
    if entries is None:
        raise RulePackError(f"{root}: no such rule file or folder")
    if not entries:
        raise RulePackError(f"{root}: no *.yaml rule files")
    return [(name, _read(name, file)) for name, file in sorted(entries, key=lambda e: e[0])]


def _read(name: str, file: str | Traversable) -> bytes:
    try:
        return file_bytes(file) if isinstance(file, str) else file.read_bytes()
    except OSError as exc:
        raise RulePackError(f"{name}: cannot read: {exc}") from exc


def file_bytes(path: str) -> bytes:
    """The bytes of the file at ``path`` (OSError when it cannot be read)."""
    with open(path, "rb") as file:
        return file.read()


def shipped_file(name: str) -> bytes:
    """The file ``name`` of the shipped pack's folder (the catalogue), found as
    :func:`shipped_rules` finds the folder; OSError when it cannot be read."""
    root = shipped_rules()
    if isinstance(root, str):
        return file_bytes(os.path.join(root, name))
    return (root / name).read_bytes()


_PACK_FORMAT = 3  # bump when what is stored changes meaning
# The modules whose code decides whether a pack is valid and what it means.
_JUDGES = (
    "pack/rules.py",
    "pack/pack.py",
    "pack/packcheck.py",
    "pack/evidence.py",
    "model.py",
    "pack/matching.py",
)


def _pack_key(sources: list[tuple[str, bytes]]) -> str | None:
    """A hash of the pack and of everything its validation depends on; None if unknown."""
    digest = dbcache.hasher(b"rulepack%d\0" % _PACK_FORMAT)
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # diagnostics/
    try:
        judges = [(name, file_bytes(os.path.join(here, name))) for name in _JUDGES]
        re2_file = os.stat(re2.__file__ or "")
    except (OSError, TypeError):
        return None
    extra = (
        str(getattr(hyperscan, "__version__", "")),
        str(getattr(re2, "__version__", "")),
        f"{re2.__file__}:{re2_file.st_size}:{re2_file.st_mtime_ns}",
    )
    for part in extra:
        digest.update(part.encode() + b"\0")
    for file_name, data in (*judges, *sources):
        digest.update(b"%d:%s:%d:" % (len(file_name), file_name.encode(), len(data)) + data)
    return digest.hexdigest()


def _stored(doc: tuple[str, object]) -> tuple[str, object]:
    """A parsed file as the cache holds it: a provenance section as its own marshal bytes,
    unmarshalled only when the pack's provenance is first read (~3,400 entries: most of
    the cached pack's unmarshalling otherwise)."""
    file_name, data = doc
    if isinstance(data, dict) and "provenance" in data:
        return file_name, {**data, "provenance": marshal.dumps(data["provenance"])}
    return doc


def _cached_docs(
    path: str,
) -> tuple[list[tuple[str, object]], dict[str, dict[str, int]]] | None:
    """The parsed files of a validated pack, and its patterns' named groups."""
    payload = dbcache.read_entry(path)
    if payload is None:
        return None
    try:
        stored = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(stored, list) and len(stored) == 3 and stored[0] == _PACK_FORMAT):
        return None
    docs, groups = stored[1], stored[2]
    if not isinstance(docs, list) or not all(
        isinstance(d, tuple) and len(d) == 2 and isinstance(d[0], str) for d in docs
    ):
        return None
    if not isinstance(groups, dict):
        return None
    return docs, groups


_unanchored = prefilter_form  # the prefilter form (bench/ reads it under this name)
