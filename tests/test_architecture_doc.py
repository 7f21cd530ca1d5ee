"""docs/architecture.md stays true: every module, folder and command it names exists,
every module of worker/ and diagnostics/ is on the map under its own folder's heading,
and every folder has its section."""

from __future__ import annotations

import re

from tests.support.vllm_env import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("worker", "diagnostics")


def _named_in_tables() -> set[str]:
    """Paths named in the module tables, made whole (``handler.py`` under the heading
    ``worker/queue/`` is ``worker/queue/handler.py``)."""
    named: set[str] = set()
    folder = None
    for line in DOC.splitlines():
        heading = re.match(r"#+ `((?:worker|diagnostics)/[\w/]*)`", line)
        if heading:
            folder = heading.group(1)
        elif line.startswith("## "):
            folder = None
        elif line.startswith("| `") and folder:
            cell = line.split("|")[1]
            named |= {f"{folder}{name}" for name in re.findall(r"`([\w.]+)`", cell)}
    return named


def test_every_path_the_map_names_exists() -> None:
    paths = set(
        re.findall(r"`((?:worker|diagnostics|rules|tests|scripts|docs|fixtures)/[\w/.*-]*)`", DOC)
    )
    paths |= _named_in_tables()
    assert len(paths) > 60
    missing = sorted(p for p in paths if not list(ROOT.glob(p.rstrip("/"))))
    assert missing == []


def test_every_module_is_on_the_map_under_its_folder() -> None:
    named = _named_in_tables()
    modules = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).glob("*/*.py")
        if path.name != "__init__.py"
    }
    assert sorted(modules - named) == []


def test_every_folder_has_a_section_and_no_folder_is_a_flat_list() -> None:
    for package in PACKAGES:
        top = [p.name for p in (ROOT / package).glob("*.py")]
        assert set(top) <= {"__init__.py", "__main__.py", "main.py", "model.py"}, top
        for folder in (ROOT / package).iterdir():
            if (folder / "__init__.py").exists():
                assert f"`{package}/{folder.name}/`" in DOC, folder
                assert len(list(folder.glob("*.py"))) - 1 <= 13, folder  # about 12 at most
