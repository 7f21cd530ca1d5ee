"""Skipping blocks that cannot change a verdict (shortcut 2 of
:mod:`diagnostics.scanning.fastpath`): one single-match scan of a block, its lines joined,
says whether any pattern that could still change the verdict occurs in it."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import hyperscan

from diagnostics.pack.rules import RulePack
from diagnostics.scanning.blockdb import (
    Scanner,
    Standing,
    _any_match,
    _database,
    _heads,
    _sources,
    relevant_ids,
)
from diagnostics.scanning.blocktext import _LOST_ESC_HINT, _cleaned, _joined_counted

# Up to this many patterns, the lost-ESC search joins their scan. The standings of the
# memory and device-fault rules leave 62-131 patterns relevant (2026-12-04): at 64, the
# kv-cache crash loop's 66 (two more memory patterns) cost it 0.72 -> 0.94 s a 524 MB
# log, the cleaning pass on every block; at 160 the crash loops of ranks 9-14 (74-131
# patterns) scan as fast as at 64 or faster (docs/benchmarks.md, stop 44).
_HINT_IN_DATABASE = 160
# A standing that leaves more than this share of the patterns relevant scans with the
# database of every pattern, its matches filtered: a database of its own would scan
# hardly faster, and each cost ~0.35 s to compile on an empty cache (16 of the pack's 30
# ranks leave 695-801 of its 802 patterns, 2026-12-02).
_SHARED_ABOVE = 0.5


class Presence(NamedTuple):
    database: hyperscan.Database
    hint: int | None  # the lost-ESC entry's id (None: none in this database)
    only: frozenset[int] | None  # the ids that count (None: every one)


@lru_cache(maxsize=64)
def _presence(pack: RulePack, standing: Standing) -> Presence | None:
    """A single-match database of the heads of the patterns that can change a verdict
    standing so (None: every pattern), the id of an extra entry that finds colour codes
    which lost their ESC (None when there is none: in a large database that entry slows
    every scan more than a search of its own costs) and, when the database is every
    pattern's, the ids that count; None when nothing can change the verdict."""
    ids = range(len(pack.patterns)) if standing is None else sorted(relevant_ids(pack, *standing))
    if not ids:
        return None
    if standing is not None and len(ids) > _SHARED_ABOVE * len(pack.patterns):
        every = _presence(pack, None)
        assert every is not None
        return Presence(every.database, every.hint, frozenset(ids))
    flag = hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_SINGLEMATCH
    sources = _sources(pack, ids)
    if len(ids) > _HINT_IN_DATABASE:
        heads = _database(sources, flag, lambda: [_heads(pack)[i] for i in ids])
        return Presence(heads, None, None)
    sources.append(_LOST_ESC_HINT.pattern)
    database = _database(
        sources, flag, lambda: [*(_heads(pack)[i] for i in ids), _LOST_ESC_HINT.pattern]
    )
    return Presence(database, len(sources) - 1, None)


def _nothing_relevant(block: bytes, scan: Scanner, standing: Standing) -> bool:
    """Whether no line of ``block`` can change a verdict standing so (None: no failure
    yet, every pattern counts); then the block is skipped unread."""
    return _quiet_lines(block, scan, standing) is not None


def _quiet_lines(block: bytes, scan: Scanner, standing: Standing) -> int | None:
    """The number of line ends in ``block`` when no line of it can change a verdict
    standing so (None: no failure yet, every pattern counts), else None; -1 when
    nothing at all can change it (nothing scanned, nothing counted). One scan of
    the block with its line ends removed says whether any such pattern occurs in it,
    on a line or across lines (as the classifier joins lines cut at a terminal's
    width); colour codes and carriage returns are cleaned first, as the classifier
    cleans each line. The line ends are counted as they are removed."""
    presence = _presence(scan.pack, standing)
    if presence is None:
        return -1
    database, hint, only = presence
    if hint is not None and b"\x1b" not in block:
        joined, lines = _joined_counted(block)
        found = _any_match(joined, database, hint, only)
        if found is not None:
            return None if found else lines
    # Colour codes (also some that lost their ESC): cleaned as the classifier does.
    joined, lines = _joined_counted(_cleaned(block))
    return None if _any_match(joined, database, None, only) else lines
