"""docs/architecture.md stays true: every module, folder and command it names exists, and
every module of worker/ and diagnostics/ is on the map."""

from __future__ import annotations

import re

from tests.support.vllm_env import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("worker", "diagnostics")


def _named_in_tables() -> set[str]:
    """Paths named in the module tables, made whole (``model.py`` under diagnostics/)."""
    named: set[str] = set()
    package = None
    for line in DOC.splitlines():
        heading = re.match(r"\*\*(\w+)/\*\*", line)
        if heading:
            package = heading.group(1)
        elif line.startswith("| `") and package:
            cell = line.split("|")[1]
            named |= {f"{package}/{name}" for name in re.findall(r"`([\w/.]+)`", cell)}
    return named


def test_every_path_the_map_names_exists() -> None:
    paths = set(
        re.findall(r"`((?:worker|diagnostics|rules|tests|scripts|docs|fixtures)/[\w/.*-]*)`", DOC)
    )
    paths |= _named_in_tables()
    assert len(paths) > 40
    missing = sorted(p for p in paths if not list(ROOT.glob(p.rstrip("/"))))
    assert missing == []


def test_every_module_is_on_the_map() -> None:
    named = _named_in_tables()
    modules = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).glob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    folders = {
        f"{package}/{path.name}/"
        for package in PACKAGES
        for path in (ROOT / package).iterdir()
        if (path / "__init__.py").exists()
    }
    assert sorted((modules | folders) - named) == []
