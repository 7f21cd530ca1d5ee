"""The cache of ``re`` patterns the command's modules compile (:mod:`diagnostics.pack.regexcache`):
a pattern rebuilt from its stored code is the pattern ``re`` compiles, and a damaged,
foreign or refused entry only means ``re`` compiles as before."""

from __future__ import annotations

import marshal
import re

import pytest

from diagnostics.classify import normalize
from diagnostics.pack import dbcache, regexcache

# Patterns of the shapes the modules compile: verbose with comments, named groups,
# lookarounds, flags, bytes, a character class with an escape and a bounded repeat.
PATTERNS: list[tuple[str | bytes, int]] = [
    (normalize._PREFIXES.pattern, normalize._PREFIXES.flags & ~re.UNICODE),
    (r"^(?P<level>INFO|ERROR) (?P<rest>.*?)\s*$", 0),
    (r"(?<![\w\]])\[[0-9;]{1,12}m", 0),
    (r"cuda (?:error|out of memory)", re.IGNORECASE),
    (rb"(?<!\d)(?:\d{4}-)?(\d\d)-(\d\d)[T ](\d\d):(\d\d)", 0),
    (r"(a)(?P<b>b)?\1", re.DOTALL | re.MULTILINE),
]
SAMPLES = [
    "(EngineCore_DP0 pid=12) ERROR 11-29 18:36:15 [core.py:1510] ValueError: no",
    "2025-03-01T10:00:00.123Z | INFO x",
    "INFO ok   ",
    "\x1b[0m[31mCUDA Out Of Memory",
    "aba\nab",
]


def _keys() -> list[regexcache.CacheKey]:
    return [(type(pattern), pattern, int(flags)) for pattern, flags in PATTERNS]


def test_a_rebuilt_pattern_is_the_pattern_re_compiles():
    payload = regexcache.encoded(_keys())
    assert payload is not None
    rebuilt = regexcache.rebuilt(payload)
    assert set(rebuilt) == set(_keys())
    for (kind, pattern, flags), compiled in rebuilt.items():
        fresh = re.compile(pattern, flags)
        # CPython's Pattern equality compares the text, the flags and the engine's code.
        assert compiled == fresh
        assert compiled.groupindex == fresh.groupindex
        assert compiled.groups == fresh.groups
        for sample in SAMPLES:
            text = sample.encode() if kind is bytes else sample
            found, expected = compiled.search(text), fresh.search(text)  # type: ignore[arg-type]
            assert (found and found.groupdict(), found and found.span()) == (
                expected and expected.groupdict(),
                expected and expected.span(),
            )


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not marshal data",
        marshal.dumps((99, [])),  # another format
        marshal.dumps((1, [("a", 0, 32, [1, 2, 3], 0, {}, ())])),  # code the engine refuses
        marshal.dumps((1, [("a",)])),
    ],
)
def test_an_entry_that_cannot_be_used_gives_nothing(payload):
    assert regexcache.rebuilt(payload) == {}


def test_a_run_stores_what_it_compiled_and_the_next_finds_it(tmp_path):
    path = str(tmp_path / "re" / "entry.re")
    pattern = r"^regexcache test (?P<n>\d+) only$"
    re.purge()
    with regexcache.prefilled(path):
        re.compile(pattern)
    payload = dbcache.read_entry(path)
    assert payload is not None
    assert (str, pattern, 0) in regexcache.rebuilt(payload)
    stored = (tmp_path / "re" / "entry.re").stat().st_mtime_ns

    re.purge()
    with regexcache.prefilled(path):
        cached = re._cache.get((str, pattern, 0))  # type: ignore[attr-defined]
        assert cached is not None  # there before anything compiled it
        assert re.compile(pattern) is cached
    # Nothing new compiled: the entry is not written again.
    assert (tmp_path / "re" / "entry.re").stat().st_mtime_ns == stored

    re.purge()
    with regexcache.prefilled(path):
        re.compile(pattern)
        re.compile(r"^another (?:one)$")
    payload = dbcache.read_entry(path)
    assert payload is not None
    assert {(str, pattern, 0), (str, r"^another (?:one)$", 0)} <= set(regexcache.rebuilt(payload))


def test_a_damaged_entry_is_compiled_afresh_and_replaced(tmp_path):
    path = tmp_path / "entry.re"
    dbcache.write_entry(tmp_path, "entry.re", b"damaged")
    re.purge()
    with regexcache.prefilled(str(path)):
        assert re.compile(r"^afresh$").match("afresh")
    payload = dbcache.read_entry(path)
    assert payload is not None and (str, r"^afresh$", 0) in regexcache.rebuilt(payload)


def test_no_entry_without_a_cache_folder(monkeypatch):
    monkeypatch.setenv("DIAGNOSE_CACHE", "off")
    assert regexcache.entry_path() is None
    with regexcache.prefilled(None):
        assert re.compile(r"^nothing stored$")


def test_the_entry_lives_beside_the_databases_and_is_this_python_s(monkeypatch, tmp_path):
    monkeypatch.delenv("DIAGNOSE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = regexcache.entry_path()
    assert path is not None and path.endswith(".re")
    assert path.startswith(str(tmp_path / "runpod-vllm-worker" / regexcache.FOLDER))
    monkeypatch.setattr("sys.version", "3.99.0 (another build)")
    assert regexcache.entry_path() != path
