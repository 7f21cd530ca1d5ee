"""The two regex engines behind the rule pack, both linear in the length of the text.

* RE2 (``google-re2``) runs every match and capture: it cannot backtrack, so no
  pattern, built in or user supplied, can take more than linear time on a line.
  A pattern RE2 cannot compile (back-references, look-around) is refused at load.
* Hyperscan prefilters: it scans a block or a line for every pattern at once and
  says which may match. Its form of a pattern drops every ``^``/``$``/``\\A``/``\\z``
  anchor and widens every bounded repeat (``x{0,300}`` and ``x{2,5}`` read ``x*``)
  (:func:`prefilter_form`): such a pattern matches wherever the pattern matched, so the
  prefilter can only say "maybe" too often, never miss a line RE2 would match, whether
  it scans a 1 MiB block or one line. Bounded repeats are what Hyperscan compiles
  slowest: widened, a fresh install's first ``diagnose`` compiled its databases in
  ~1 s instead of ~2.3 s (2026-12-02).
"""

from __future__ import annotations

import re
from functools import cache

import hyperscan
import re2

from diagnostics.pack import dbcache

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print its own complaint to stderr
_ANCHOR_MARKS = ("^", "$", "\\A", "\\z", "\\Z", "{")  # what prefilter_form may change
_PREFILTER_FORM = b"prefilter-form-2"  # bump when prefilter_form changes what it returns


@cache
def _repeat() -> re.Pattern[str]:  # compiled on first use: only a cache miss needs it
    return re.compile(r"\{\d+(?:,\d*)?\}")  # a bounded repeat (else RE2 reads "{" as "{")


class RegexError(ValueError):
    """A pattern RE2 cannot compile."""


class Regex:
    """A compiled RE2 pattern with the parts of ``re.Pattern`` the pack uses.

    ``lazy=True`` (a pack read back from the validated-pack cache, whose every pattern
    compiled when it was stored) defers RE2's compile to the first use of ``search`` or
    ``groupindex``; afterwards they are plain attributes, as fast as an eager one.
    ``groups``: a lazy pattern's ``groupindex`` as RE2 gave it when the pattern was
    stored; reading it then compiles nothing (the pack's templates and ``transient_if``
    tests, and the scanner's phase captures, only ask which names a pattern captures)."""

    __slots__ = ("_compiled", "flags", "groupindex", "pattern", "search")
    groupindex: dict[str, int]

    def __init__(
        self, pattern: str, *, lazy: bool = False, groups: dict[str, int] | None = None
    ) -> None:
        self.pattern = pattern
        self.flags = re.IGNORECASE if "i" in _leading_flags(pattern) else 0
        if not lazy:
            self._compile()
        elif groups is not None:
            self.groupindex = groups

    def _compile(self) -> None:
        try:
            compiled = re2.compile(self.pattern, _OPTIONS)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise RegexError(
                f"RE2 cannot compile it ({detail}); patterns must run in linear time, so "
                "back-references and look-around are not available"
            ) from None
        self._compiled = compiled
        self.groupindex = dict(compiled.groupindex)
        self.search = compiled.search

    def __getattr__(self, name: str):  # only called while a slot is unset: not compiled yet
        if name in ("_compiled", "groupindex", "search"):
            self._compile()
            return object.__getattribute__(self, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"


def _leading_flags(pattern: str) -> str:
    r"""The letters of a leading ``(?flags)`` (``"i"`` of ``(?i)...``), else ``""``: what
    ``^\(\?([a-zA-Z]+)\)`` captures, without compiling it (~0.3 ms of ``re`` a run)."""
    if not pattern.startswith("(?"):
        return ""
    end = pattern.find(")", 2)
    letters = pattern[2:end] if end > 2 else ""
    return letters if letters.isascii() and letters.isalpha() else ""


def prefilter_form(pattern: str) -> str:
    """``pattern`` without anchors and with each bounded repeat widened to ``*`` (outside
    character classes), for Hyperscan."""
    if not any(mark in pattern for mark in _ANCHOR_MARKS):
        return pattern  # nothing to drop (most patterns): no character-by-character walk
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            pair = pattern[i : i + 2]
            i += 2
            if not in_class and pair in ("\\A", "\\z", "\\Z"):
                continue
            out.append(pair)
            continue
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    out.append(pattern[i : end + 2])
                    i = end + 2
                    continue
            if char == "]":
                in_class = False
            out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            i += 1
            # A "]" right after "[" or "[^" is a literal member of the class.
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("]")
                i += 1
            continue
        if char in "^$":
            i += 1
            continue
        if char == "{" and (repeat := _repeat().match(pattern, i)):
            out.append("*")
            i = repeat.end()
            continue
        out.append(char)
        i += 1
    return "".join(out)


def hyperscan_database(
    expressions: list[str], single_match: bool = False, pack_key: str | None = None
) -> hyperscan.Database:
    """A block-mode database of ``expressions`` (ids = their indexes); raises hyperscan.error.
    Read from the disk cache when this exact database was compiled before (dbcache).
    ``pack_key``: the expressions are every pattern of the pack with this key
    (:attr:`diagnostics.pack.pack.RulePack.key`, a hash of its files and of this code),
    which then keys the database instead of the expressions themselves."""
    mode = hyperscan.HS_MODE_BLOCK
    # No UTF-8 mode: logs may hold invalid UTF-8, which that mode does not allow.
    flag = hyperscan.HS_FLAG_ALLOWEMPTY | (hyperscan.HS_FLAG_SINGLEMATCH if single_match else 0)
    ids = list(range(len(expressions)))
    flags = [flag] * len(expressions)

    def build() -> hyperscan.Database:
        compiled = [prefilter_form(e).encode("utf-8") for e in expressions]
        db = hyperscan.Database(mode=mode)
        db.compile(expressions=compiled, ids=ids, elements=len(ids), flags=flags)
        return db

    if pack_key is not None:  # hashing ~800 expressions costs more than reading the database
        parts = [_PREFILTER_FORM, b"pack %s %d" % (pack_key.encode(), len(expressions))]
        key = dbcache.key(parts, [-1, -2], [0, flag], mode)
    else:
        # Keyed on the expressions as written (with the prefilter form's version), so a
        # cache hit does not compute the prefilter forms.
        raw = [_PREFILTER_FORM, *(e.encode("utf-8", "surrogatepass") for e in expressions)]
        key = dbcache.key(raw, [-1, *ids], [0, *flags], mode)
    return dbcache.load_or_compile(key, mode, build)
