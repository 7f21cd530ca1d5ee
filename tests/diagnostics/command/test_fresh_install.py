"""``diagnose`` on a fresh install: what the first run compiles, later runs read back.

A fresh install has no bytecode beside an editable or checked-out source when Python
may not write it (``PYTHONDONTWRITEBYTECODE``, set on many machines and images), and
an empty cache folder. The first run compiles the rule pack's databases and the
package's bytecode into the cache; a second run must find all of it there and write
nothing (no database compiled, no pack validated, no module or pattern compiled again), and must
still find it after other packs were stored in the same folder. Asserted on the cache's
files and on what Python says it loaded (``PYTHONVERBOSE``), never on timing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagnostics.command import cli
from diagnostics.pack import dbcache

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "fixtures" / "vllm-0.32" / "kv-cache-too-small.log"
ENTRY = "import sys; from diagnostics.command.cli import run; sys.exit(run())"


def _install(tmp: Path) -> Path:
    """The package and its rules as a fresh install lays them out: source, no bytecode."""
    site = tmp / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "diagnostics", site / "diagnostics", ignore=ignore)
    shutil.copytree(ROOT / "rules", site / "rules", ignore=ignore)
    return site


def _diagnose(site: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "--format", "json", str(LOG)],
        cwd=site.parent,  # not the repository: its own diagnostics/ must not shadow the copy
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(site),
            "PYTHONDONTWRITEBYTECODE": "1",
            "XDG_CACHE_HOME": str(cache),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, mtime in ns)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _verdict(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, run.stderr[-2000:]
    return json.loads(run.stdout)["rule"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, tuple[int, int]]]:
    """A fresh install after its first run: the package, its cache, the cache's files."""
    tmp = tmp_path_factory.mktemp("fresh")
    site, cache = _install(tmp), tmp / "cache"
    assert _verdict(_diagnose(site, cache)) == "kv-cache-no-memory"
    return site, cache, _files(cache)


def _ours(files: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {name: stat for name, stat in files.items() if "other-" not in name}


def test_the_second_run_of_a_fresh_install_compiles_and_writes_nothing(installed):
    site, cache, first = installed
    hyperscan = [name for name in first if name.startswith("runpod-vllm-worker/hyperscan/")]
    assert any(name.endswith(".hsdb") for name in hyperscan)
    assert any(name.endswith(".pack") for name in hyperscan)
    # The patterns the modules compiled at import, beside the databases (regexcache).
    assert [name for name in first if name.startswith("runpod-vllm-worker/re/")]
    # The package's bytecode went to the cache folder, never beside the source.
    mirror = cache / "runpod-vllm-worker" / "bytecode" / site.relative_to(site.anchor)
    for module in ("pack/rules", "pack/dbcache", "scanning/scan", "classify/classifier"):
        name = f"{module}.{sys.implementation.cache_tag}.pyc"
        assert (mirror / "diagnostics" / name).is_file(), name
    assert not list(site.rglob("*.pyc"))

    second = _diagnose(site, cache, PYTHONVERBOSE="1")
    assert _verdict(second) == "kv-cache-no-memory"
    assert _ours(_files(cache)) == first  # nothing compiled, validated or written again
    said = second.stderr.splitlines()
    loaded = [line for line in said if line.startswith("# code object from")]
    for module in ("rules", "scan", "classifier", "render"):
        assert any(f"{module}.{sys.implementation.cache_tag}.pyc" in line for line in loaded)
    assert not [line for line in said if line.startswith("# created") and ".pyc" in line]


def test_the_cache_outlives_other_packs_stored_after_it(installed):
    site, cache, first = installed
    # Other packs (an edited pack, a test's) store their databases in the same folder.
    folder = cache / "runpod-vllm-worker" / "hyperscan"
    for n in range(20):
        dbcache.write_entry(folder, f"other-{n:02d}.hsdb", b"another pack's database")
    _verdict(_diagnose(site, cache))
    assert _ours(_files(cache)) == first  # still there: nothing compiled again


def test_an_entry_in_use_is_kept_and_an_unused_one_pruned(tmp_path):
    folder = tmp_path / "hyperscan"
    dbcache.write_entry(folder, "used.hsdb", b"read on every run")
    dbcache.write_entry(folder, "unused.hsdb", b"never read again")
    for name, days in (("used.hsdb", 3), ("unused.hsdb", 2)):  # written days ago
        written = time.time() - days * 86400
        os.utime(folder / name, (written, written))
    assert dbcache.read_entry(folder / "used.hsdb") == b"read on every run"
    for n in range(dbcache._KEEP - 1):
        dbcache.write_entry(folder, f"other-{n:02d}.hsdb", b"another pack's database")
    assert (folder / "used.hsdb").exists()
    assert not (folder / "unused.hsdb").exists()
    assert len(list(folder.glob("*.hsdb"))) == dbcache._KEEP


def test_bytecode_stays_where_python_puts_it_unless_it_is_forbidden(monkeypatch):
    bytecode_dir = cli.bytecode_dir
    env = {"XDG_CACHE_HOME": "/c"}
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert bytecode_dir(env) is None  # Python writes it beside the source itself
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(cli, "__cached__", "/nonexistent/cli.pyc")
    assert bytecode_dir(env) == "/c/runpod-vllm-worker/bytecode"
    assert Path(bytecode_dir(env) or "").parent == Path(dbcache.cache_dir(env) or "").parent
    assert bytecode_dir({**env, "DIAGNOSE_CACHE": "off"}) is None
    monkeypatch.setattr(cli, "__cached__", cli.__file__)  # bytecode beside the source
    assert bytecode_dir(env) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["a.log"],
        ["a.log", "b.log", "-"],
        ["--format", "json", "a.log"],
        ["--format=json", "--rules", "pack/", "a.log", "b.log"],
        ["--rules=", "a.log"],
        ["--rules", "", "a.log"],
        ["--format", "text", "--format", "json", "a.log"],
        ["--form", "json", "a.log"],  # abbreviated: argparse's
        ["a.log", "--format", "json"],  # an option after a file: argparse's
        ["--", "a.log"],
        ["--rules", "-", "a.log"],
    ],
)
def test_the_usual_arguments_are_read_as_argparse_reads_them(argv):
    parsed = cli._parser().parse_args(argv)
    assert cli.arguments(argv) == (parsed.files, parsed.format, parsed.rules)


@pytest.mark.parametrize(
    "argv",
    [[], ["--format", "xml", "a.log"], ["--format"], ["-x", "a.log"], ["--rules", "p"], ["-h"]],
)
def test_anything_else_is_argparse_s_to_refuse(argv, capsys):
    with pytest.raises(SystemExit) as refused:
        cli._parser().parse_args(argv)
    expected = (refused.value.code, capsys.readouterr())
    with pytest.raises(SystemExit) as again:
        cli.arguments(argv)
    assert (again.value.code, capsys.readouterr()) == expected
