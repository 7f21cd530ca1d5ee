"""The cache of validated rule packs (diagnostics.pack.rules + diagnostics.pack.dbcache).

A pack read back from the cache must be the pack validated before; a pack that fails
validation is never stored, and a damaged, foreign or unwritable cache only costs
time. Every test points the cache at its own folder (XDG_CACHE_HOME).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diagnostics import classify_lines
from diagnostics.pack.matching import Regex, RegexError
from diagnostics.pack.rules import RulePackError, load_pack

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "rules"
LOG = [
    "INFO 11-29 18:36:15 [api_server.py:1] vLLM API server version 0.32.0",
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine.",
]
GOOD = """\
rules:
  - id: thing-broke
    category: bad_config
    permanent: true
    patterns: ['^THING (?P<what>\\w+) BROKE$']
    cause: "{what} broke."
    fix: Mend {what}.
"""


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DIAGNOSE_CACHE", raising=False)
    return tmp_path / "xdg" / "runpod-vllm-worker" / "hyperscan"


@pytest.fixture
def small_pack(tmp_path) -> Path:
    """A one-rule pack: validating it takes milliseconds, the shipped pack about a second
    (the tests that validate again and again use this one)."""
    pack = tmp_path / "small-pack.yaml"
    pack.write_text(GOOD)
    return pack


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pack")) if folder.is_dir() else []


def _summary(pack) -> list[tuple]:
    return [
        (
            r.id,
            r.category,
            r.permanent,
            tuple(rx.pattern for rx in r.patterns),
            tuple(rx.groupindex.items() for rx in r.patterns),
            r.cause,
            r.fix,
            r.priority,
            r.source,
            tuple(rx.pattern for rx in r.traceback_through),
            tuple(rx.pattern for rx in r.after),
            r.before_ready,
            dict(r.defaults),
            r.generic,
            None if r.transient_if is None else r.transient_if.test,
        )
        for r in pack.rules
    ] + [(p.phase, tuple(rx.pattern for rx in p.patterns), p.source) for p in pack.phases]


def test_the_shipped_pack_read_back_is_the_pack_validated(cache, tmp_path):
    """Validated once (about two seconds of CPU), then read back: from its own folder and
    from a copy of it elsewhere (same files, same entry)."""
    fresh = load_pack()
    assert len(_entries(cache)) == 1
    cached = load_pack()
    assert _summary(cached) == _summary(fresh)
    assert [p.regex.pattern for p in cached.patterns] == [p.regex.pattern for p in fresh.patterns]
    assert classify_lines(LOG, cached) == classify_lines(LOG, fresh)
    assert classify_lines(LOG, cached).rule == "kv-cache-no-memory"
    copy = tmp_path / "copy"
    shutil.copytree(RULES, copy)
    assert _summary(load_pack(copy)) == _summary(fresh)
    assert len(_entries(cache)) == 1


def test_a_cached_load_parses_no_yaml_and_compiles_patterns_on_use(tmp_path, small_pack):
    """In a process of its own (nothing imported before); the one-rule pack, since
    validating the shipped one twice more would cost seconds and show nothing more."""
    code = (
        "import sys\n"
        "from diagnostics.pack.rules import load_pack\n"
        f"pack = load_pack({str(small_pack)!r})\n"
        "from diagnostics.pack.matching import Regex\n"
        "def compiled(rx):  # the slot itself: getattr would compile it\n"
        "    try:\n"
        "        Regex._compiled.__get__(rx)\n"
        "    except AttributeError:\n"
        "        return False\n"
        "    return True\n"
        "compiled = sum(1 for p in pack.patterns if compiled(p.regex))\n"
        "print('yaml' in sys.modules, compiled == len(pack.patterns))\n"
    )
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0] == ["True", "True"]  # first load: parsed and every pattern compiled
    assert runs[1] == ["False", "False"]  # from the cache: no YAML, RE2 compiles on use


def test_a_changed_pack_is_validated_again(cache, tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "10-rules.yaml").write_text(GOOD)
    assert classify_lines(["THING gear BROKE"], load_pack(pack)).cause == "gear broke."
    (pack / "10-rules.yaml").write_text(GOOD.replace("{what} broke.", "{what} failed."))
    assert classify_lines(["THING gear BROKE"], load_pack(pack)).cause == "gear failed."
    (pack / "10-rules.yaml").write_text(GOOD.replace("{what} broke.", "{nothing} broke."))
    with pytest.raises(RulePackError, match="nothing"):
        load_pack(pack)
    assert len(_entries(cache)) == 2


@pytest.mark.parametrize(
    "broken",
    [
        GOOD.replace("(?P<what>\\w+)", "(?P<what>\\w+) \\1"),  # RE2 refuses back-references
        GOOD.replace("{what} broke.", "{who} broke."),  # template names no capture
        GOOD.replace("cause:", "cause: x\n    cause:"),  # a repeated key
    ],
)
def test_a_broken_pack_is_never_stored_and_fails_every_time(cache, tmp_path, broken):
    pack = tmp_path / "pack.yaml"
    pack.write_text(broken)
    for _ in range(2):
        with pytest.raises(RulePackError):
            load_pack(pack)
    assert _entries(cache) == []


def test_a_damaged_entry_is_ignored_and_replaced(cache, small_pack):
    expected = _summary(load_pack(small_pack))
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    assert len(good) > 90  # every damage below leaves bytes to misread
    for damage in (good[:-5], b"garbage", good[:40] + b"\0" * 50, good[:-1] + b"\x01"):
        entry.write_bytes(damage)
        assert _summary(load_pack(small_pack)) == expected
        assert entry.read_bytes() == good


def test_a_cache_that_is_off_or_unwritable_stores_nothing(cache, tmp_path, monkeypatch, small_pack):
    monkeypatch.setenv("DIAGNOSE_CACHE", "off")
    assert classify_lines(["THING gear BROKE"], load_pack(small_pack)).cause == "gear broke."
    assert not cache.exists()
    monkeypatch.delenv("DIAGNOSE_CACHE")
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    for _ in range(2):
        assert classify_lines(["THING gear BROKE"], load_pack(small_pack)).cause == "gear broke."


def test_a_lazy_regex_is_the_eager_one():
    eager, lazy = Regex(r"(?i)gpu (?P<n>\d+)"), Regex(r"(?i)gpu (?P<n>\d+)", lazy=True)
    assert lazy.flags == eager.flags
    assert lazy.search("GPU 3").group("n") == eager.search("GPU 3").group("n") == "3"
    assert lazy.groupindex == eager.groupindex
    with pytest.raises(RegexError):
        Regex(r"(a)\1")
    with pytest.raises(RegexError):
        Regex(r"(a)\1", lazy=True).search("aa")
    with pytest.raises(AttributeError):
        _ = Regex("a", lazy=True).missing
