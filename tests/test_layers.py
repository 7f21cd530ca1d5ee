"""Imports run one way: every "X never imports Y" that a package's docstring states is
checked here, on the source (every ``import`` and ``from ... import``, also inside
functions), for every module of ``worker/`` and ``diagnostics/``.

``ALLOWED`` is the one table: a package -> the packages of this repository it may
import. A package not named may import nothing of this repository but itself. The
composition root (``worker.main``, ``worker/__init__``, ``worker/__main__``) wires
everything and is not listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIAGNOSTICS = {
    "diagnostics.model",
    "diagnostics.redaction",
    "diagnostics.pack",
    "diagnostics.classify",
    "diagnostics.attempts",
    "diagnostics.scanning",
    "diagnostics.formats",
    "diagnostics.command",
    "diagnostics",  # the package's own re-exports
}
ALLOWED: dict[str, set[str]] = {
    # diagnostics/ is pure and never imports worker/
    "diagnostics.model": set(),
    "diagnostics.redaction": set(),
    "diagnostics.pack": {"diagnostics.model"},
    "diagnostics.classify": {"diagnostics.model", "diagnostics.pack", "diagnostics.redaction"},
    "diagnostics.attempts": {
        "diagnostics.model",
        "diagnostics.pack",
        "diagnostics.classify",
        "diagnostics.redaction",
    },
    "diagnostics.formats": {"diagnostics.classify", "diagnostics.redaction"},
    "diagnostics.scanning": {
        "diagnostics.model",
        "diagnostics.pack",
        "diagnostics.classify",
        "diagnostics.attempts",
        "diagnostics.redaction",
        "diagnostics.formats",
    },
    "diagnostics.command": DIAGNOSTICS,
    "diagnostics.__init__": DIAGNOSTICS,
    # worker/: settings and seams at the bottom, the two modes at the top
    "worker.seams": {"diagnostics.redaction"},
    "worker.config": {"diagnostics.redaction"},
    "worker.image": {"diagnostics.redaction"},
    "worker.modelinfo": {"worker.seams"},
    "worker.memory": set(),
    "worker.crashloop": {"worker.config", *DIAGNOSTICS},
    "worker.preflight": {
        "worker.config",
        "worker.memory",
        "worker.modelinfo",
        "worker.seams",
        *DIAGNOSTICS,
    },
    "worker.supervision": {
        "worker.config",
        "worker.crashloop",
        "worker.preflight",
        "worker.modelinfo",
        "worker.seams",
        *DIAGNOSTICS,
    },
    "worker.queue": {"worker.supervision", "worker.config", "worker.seams", *DIAGNOSTICS},
    "worker.lb": {"worker.supervision", "worker.config", "worker.seams", *DIAGNOSTICS},
}
ROOTS = {"worker.main", "worker.__init__", "worker.__main__"}


def package_of(dotted: str) -> str:
    """``worker.queue.handler`` -> ``worker.queue``; a top-level module is itself."""
    parts = dotted.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1] / "__init__.py").exists():
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else parts[0]


def _exists(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports_of(path: Path) -> set[str]:
    """The packages of this repository a module imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(package_of(name if _exists(name) else node.module))
        elif isinstance(node, ast.Import):
            found.update(package_of(alias.name) for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("worker", "diagnostics")}


def modules() -> list[tuple[str, Path]]:
    out = []
    for top in ("worker", "diagnostics"):
        for path in sorted((ROOT / top).rglob("*.py")):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out.append((dotted, path))
    return out


def _wrong_imports(dotted: str, path: Path) -> str | None:
    """What is wrong with the imports of one module, or None."""
    if dotted in ROOTS:
        return None
    own = package_of(dotted) if not dotted.endswith("__init__") else dotted.rsplit(".", 1)[0]
    if own == "diagnostics":
        own = "diagnostics.__init__"
    if own not in ALLOWED:
        return f"{own} is not in the layer table: add it with what it may import"
    wrong = sorted(
        name
        for name in imports_of(path)
        if name != own.removesuffix(".__init__") and name not in ALLOWED[own]
    )
    return f"{dotted} imports {wrong}, against the direction stated for {own}" if wrong else None


def test_imports_run_one_way():
    """Every module, in one walk that names each wrong import."""
    found = modules()
    assert len(found) > 100
    wrong = [problem for dotted, path in found if (problem := _wrong_imports(dotted, path))]
    assert wrong == [], "\n".join(wrong)


def test_every_package_has_its_docstring_saying_what_it_may_import():
    for top in ("worker", "diagnostics"):
        for init in sorted((ROOT / top).glob("*/__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            assert "May import" in doc and "mported by" in doc, init


def test_the_table_catches_a_wrong_import(tmp_path):
    # The check itself can fail: a module of diagnostics importing the worker.
    bad = tmp_path / "m.py"
    bad.write_text("from worker.queue.handler import make_handler\nimport diagnostics.pack.rules\n")
    assert imports_of(bad) == {"worker.queue", "diagnostics.pack"}
    assert not {"worker.queue"} <= ALLOWED["diagnostics.pack"]
