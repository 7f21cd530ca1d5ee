"""The house rule on size: every module of worker/ and diagnostics/ at most ``MAX_LINES``
lines, every class at most ``MAX_CLASS_LINES`` (from its ``class`` line to its last
line). A module or class past it is split by job
(docs/architecture.md names each module under its folder)."""

from __future__ import annotations

import ast

from tests.support.vllm_env import ROOT

MAX_LINES = 300
MAX_CLASS_LINES = 150
PACKAGES = ("worker", "diagnostics")
MODULES = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _name(path) -> str:
    return str(path.relative_to(ROOT))


def _lines(path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _long_classes(path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    long = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_CLASS_LINES:
                long.append(f"{node.name} ({size} lines, line {node.lineno})")
    return long


def test_there_are_modules_to_check() -> None:
    assert len(MODULES) > 100


def test_a_module_is_at_most_300_lines() -> None:
    long = [f"{_name(p)}: {_lines(p)} lines" for p in MODULES if _lines(p) > MAX_LINES]
    assert long == [], "split these modules by job:\n" + "\n".join(long)


def test_a_class_is_at_most_150_lines() -> None:
    long = [f"{_name(p)}: {c}" for p in MODULES for c in _long_classes(p)]
    assert long == [], "split these classes by job:\n" + "\n".join(long)
