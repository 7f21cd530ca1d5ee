"""The Hyperscan databases the block scan of :mod:`diagnostics.scanning.fastpath` uses for a
pack, built once and kept in the disk cache (:mod:`diagnostics.pack.dbcache`), and which
patterns can still change a verdict."""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import NamedTuple

import hyperscan

from diagnostics.classify.normalize import PROCESS_PREFIX, QUOTE_MARKER, WRAP_WIDTHS
from diagnostics.pack import dbcache
from diagnostics.pack.matching import prefilter_form
from diagnostics.pack.rules import Rule, RulePack, file_bytes
from diagnostics.scanning import prefilter
from diagnostics.scanning.prefilter import prefilter_head


class Scanner(NamedTuple):
    """The Hyperscan databases the block scan uses for one pack."""

    pack: RulePack
    heads: hyperscan.Database  # every pattern's head (ids = pack.patterns indexes)
    shapes: hyperscan.Database  # lines of a terminal's width
    ready: hyperscan.Database | None  # the ready markers (None: the pack has none)
    ready_indexes: tuple[int, ...]  # pack.patterns indexes of the ready markers


# The cache key of a database built from heads names the patterns and the code that
# derives them (this module and prefilter_head's): computing every head costs more
# than reading the database.
_SOURCES = file_bytes(__file__) + file_bytes(prefilter.__file__ or "")
_CODE = dbcache.hasher(_SOURCES).hexdigest().encode()


def _shape_expressions() -> list[bytes]:
    # A line of exactly one of the terminal widths (trailing CRs not counted), with or
    # without a process prefix before it (as ``normalize.wrapped_at_width`` reads it).
    prefix, quote = PROCESS_PREFIX.encode(), QUOTE_MARKER.encode()
    return [
        b"^(?:%s)?(?:%s)?[^\\n]{%d}[^\\n\\r]\\r*$" % (quote, prefix, width - 1)
        for width in sorted(WRAP_WIDTHS)
    ]


def _database(
    sources: list[bytes],
    flag: int,
    expressions: Callable[[], list[bytes]] | None = None,
    ids: list[int] | None = None,
) -> hyperscan.Database:
    """A block-mode database, from the disk cache when it was compiled before.
    ``sources`` identify it (the expressions themselves unless ``expressions`` builds
    them from the sources). ``ids``: the id each expression reports (default: its
    index; given, they are part of the sources)."""
    mode = hyperscan.HS_MODE_BLOCK
    parts = sources if expressions is None else [_CODE, *sources]
    key = dbcache.key(parts, range(len(parts)), [flag] * len(parts), mode)

    def build() -> hyperscan.Database:
        compiled = sources if expressions is None else expressions()
        db = hyperscan.Database(mode=mode)
        reported = list(range(len(compiled))) if ids is None else ids
        db.compile(
            expressions=compiled, ids=reported, elements=len(reported), flags=[flag] * len(reported)
        )
        return db

    return dbcache.load_or_compile(key, mode, build)


def _sources(pack: RulePack, indexes: Iterable[int]) -> list[bytes]:
    """What identifies the patterns ``indexes`` of ``pack`` in a database's key: the pack's
    own key (a hash of its files and of the code that reads them: the same key, the same
    patterns) and the indexes; for a pack without one, the patterns as written."""
    if pack.key is not None:  # hashing ~800 patterns costs more than reading the database
        return [b"pack " + pack.key.encode(), ",".join(map(str, indexes)).encode()]
    return [pack.patterns[i].regex.pattern.encode() for i in indexes]


@lru_cache(maxsize=4)
def _heads(pack: RulePack) -> tuple[bytes, ...]:
    return tuple(prefilter_head(prefilter_form(p.regex.pattern)).encode() for p in pack.patterns)


@lru_cache(maxsize=4)
def scanner(pack: RulePack) -> Scanner:
    allow = hyperscan.HS_FLAG_ALLOWEMPTY
    everything = range(len(pack.patterns))
    ready_indexes = tuple(
        i
        for i, p in enumerate(pack.patterns)
        if p.kind == "phase" and pack.phases[p.owner].phase == "ready"
    )
    ready = [prefilter_form(pack.patterns[i].regex.pattern).encode() for i in ready_indexes]
    return Scanner(
        pack,
        _database(_sources(pack, everything), allow, lambda: list(_heads(pack))),
        _database(_shape_expressions(), hyperscan.HS_FLAG_MULTILINE),
        _database(ready, allow) if ready else None,
        ready_indexes,
    )


# What can still change a verdict: None while no failure matched (everything can),
# else the best rule's rank, whether vLLM is in the ready phase, whether the file
# shows vLLM's program ended before its last ready marker (relevant_ids' ``exits``) and
# whether a requested shutdown began (``stopping``).
Standing = tuple[int, bool, bool, bool] | None

# A standing that leaves more than this share of the patterns relevant has no narrowed
# database (:func:`narrowed`): the database of every head, its hits filtered, is as fast.
_NARROWED_UP_TO = 0.5


@lru_cache(maxsize=64)
def narrowed(pack: RulePack, standing: Standing) -> hyperscan.Database | None:
    """A database of the heads of only the patterns that can change a verdict standing
    so, each reporting its index in the pack as every head's database does; None when
    no failure matched or most patterns can (that database serves). Compiled once a
    standing and kept in the disk cache: the block scan uses it only after many blocks
    were read line by line (a crash loop whose every block holds lines of rules that
    cannot change its verdict), where every head's database reports millions of matches
    that the scan then passes over."""
    if standing is None:
        return None
    ids = sorted(relevant_ids(pack, *standing))
    if not ids or len(ids) > _NARROWED_UP_TO * len(pack.patterns):
        return None
    heads = _heads(pack)
    sources = [b"narrowed", *_sources(pack, ids)]
    return _database(
        sources, hyperscan.HS_FLAG_ALLOWEMPTY, lambda: [heads[i] for i in ids], ids=ids
    )


@lru_cache(maxsize=64)
def relevant_ids(
    pack: RulePack, best: int, ready: bool = False, exits: bool = False, stopping: bool = False
) -> frozenset[int]:
    """The pattern indexes that can still change a verdict whose best rule has rank
    ``best`` (a later finding of the same rank never wins: the earliest does, though a
    generic structure rule's may be read in its place, classify.findings.translated,
    so that rank's lines count too when it is generic structure's): a ready
    marker and the engine's end of initialisation (they clear the verdict), a rule of a
    better rank, the traceback header and frames a better rule needs, the frame lines and
    chain markers while a better rule is generic structure (its verdict reads where the
    exception was raised), the stopping marker when a better rule is generic or the
    verdict a specific cause (the marker makes the classifier ignore generic rules, and
    every rule once a specific cause stands), and, in the ready phase (``ready``), the
    markers that end it when a better rule counts only before ready; every phase marker
    while the verdict's rule is forgotten when the start goes on, and the markers of
    downloading and loading while it is generic structure (a warning's words, which
    progress outgrows: classify.progress.outgrown). ``exits``: a
    traceback that leaves vLLM's program makes a later ready marker another program's
    (Progress.left) until vLLM starts again, and the file shows one before its last ready
    marker (readyseek's plan): before ready, the traceback headers and frames and the
    start markers count too; and so do they after a stopping marker (``stopping``: a
    start's marker ends the shutdown, Progress.enter)."""
    better_ids = {n for n, r in enumerate(pack.rules) if r.rank < best or _read_on(r, best)}
    better = [pack.rules[n] for n in sorted(better_ids)]
    traceback_rules = any(rule.traceback_through for rule in better)
    structure = any(rule.kind == "structure" for rule in better)
    generic = any(rule.generic for rule in better)
    # a specific cause stands once a requested shutdown began: the marker matters while
    # a better rule could still come (diagnostics.classify.findings)
    cause = bool(better) and any(r.rank == best and r.kind == "cause" for r in pack.rules)
    leaves_ready = ready and any(rule.before_ready for rule in better)
    # the verdict's own rule is forgotten when the start goes on: every phase marker counts
    progress = any(r.rank == best and r.until_progress for r in pack.rules)
    # or, logged below ERROR, its generic words are once the start makes progress after
    # them (classify.progress.outgrown): the markers of downloading and loading count
    words = any(r.rank == best and r.generic and r.kind == "structure" for r in pack.rules)
    leaving = exits and not ready
    found = set()
    for index, pattern in enumerate(pack.patterns):
        if pattern.kind == "phase":
            phase = pack.phases[pattern.owner].phase
            clears = phase == "ready" or "engine_done" in pattern.regex.groupindex
            keep = generic or cause if phase == "stopping" else clears or leaves_ready or progress
            keep = keep or (words and phase in ("downloading", "loading"))
            keep = keep or ((leaving or stopping) and phase == "starting")
        elif pattern.kind == "traceback":
            keep = traceback_rules or structure or leaving
        elif pattern.kind == "traceback_body":
            keep = structure or leaving
        elif pattern.kind == "chain":
            keep = structure
        elif pattern.kind == "error_level":
            keep = False  # read only while no failure matched (a shape-only verdict)
        elif pattern.kind in ("reshaped", "header_class"):
            keep = bool(better)  # read as an exception line: any rule may match it
        else:  # rule, frame, after: owned by a rule
            keep = pattern.owner in better_ids
        if keep:
            found.add(index)
    return frozenset(found)


def _read_on(rule: Rule, best: int) -> bool:
    # generic structure's later finding of the verdict's rank (classify.findings.translated)
    return rule.rank == best and rule.kind == "structure"


def _any_match(
    data: bytes,
    database: hyperscan.Database,
    hint: int | None,
    only: frozenset[int] | None = None,
) -> bool | None:
    """Whether an entry other than ``hint`` (and among ``only``, when given) matches
    ``data``; None when only ``hint`` (a lost colour code: the data must be cleaned
    first) does."""
    seen_hint = False

    def on_match(pattern_id, _from, _to, _flags, _context) -> bool:
        nonlocal seen_hint
        if pattern_id == hint:
            seen_hint = True
            return False
        return only is None or pattern_id in only  # True: stop, found

    try:
        database.scan(data, match_event_handler=on_match)
    except hyperscan.ScanTerminated:
        return True
    return None if seen_hint else False


def _ids_in(data: bytes, database: hyperscan.Database) -> set[int]:
    found: set[int] = set()
    database.scan(data, match_event_handler=lambda i, _f, _t, _fl, _c: found.add(i))
    return found
