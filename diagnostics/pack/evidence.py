"""Permanence judged on evidence: the numbers a message carries (a rule's
``transient_if``), and where an exception was raised (the pack's provenance).

The same words can mean a bad configuration or a bad host: "Free memory on device
(F/T GiB) ... less than desired GPU memory utilization (U ...)" is the configuration
when U is too close to 1, but a host fault when F/T is far below U (another process
holds the GPU). A rule states the test as a small arithmetic expression over its named
captures, for example ``free / total < util - 0.05``; when it holds on the captured
numbers, the diagnosis is transient and uses the ``cause``/``fix`` given with the test.

Captured values are read as numbers; sizes with a unit (``3.44 GiB``, ``270.00 MiB``)
are converted to GiB so that sizes in different units compare. Only numbers, capture
names, ``+ - * /``, comparisons, ``and``/``or``/``not`` and parentheses are allowed;
a test whose numbers are missing or unreadable is false (the rule's own permanence
stands).

Provenance: provenance: where an exception was raised -> a category, as data.

The pack's ``provenance:`` section (``rules/95-provenance.yaml``, written by
``scripts/gen_provenance.py`` from the catalogue of raise sites) maps the innermost frame
of vLLM, transformers, huggingface_hub or torch that a traceback shows (its file and
function), or the file vLLM's log prefix names, to the category its catalogued raise
sites carry; an exception class of those projects to the category of its raise sites;
and names the exception types that are deterministic when vLLM's own code raises them
while the engine is built (a restart on the same settings fails the same way).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import NamedTuple, cast

from diagnostics.model import Category

_KEYS = {"test", "cause", "fix"}
_SCALE = {"": 1.0, "K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Compare,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Name,
    ast.Load,
    ast.Constant,
)


class EvidenceError(ValueError):
    """A ``transient_if`` entry that cannot be used (reported by the pack loader)."""


class TransientIf(NamedTuple):
    """A test over captured numbers, and the cause/fix to give when it holds."""

    test: str
    tree: ast.Expression
    names: frozenset[str]
    cause: str
    fix: str

    def holds(self, values: Mapping[str, str]) -> bool:
        numbers = {}
        for name in self.names:
            number = as_number(values.get(name))
            if number is None:
                return False
            numbers[name] = number
        try:
            return bool(_evaluate(self.tree.body, numbers))
        except ZeroDivisionError:
            return False


@cache
def _size() -> re.Pattern[str]:  # compiled on first use: few logs hold a transient_if's line
    return re.compile(r"^\s*(-?[\d.]+)\s*([KMGT]?)(i?B)?\s*$")


def as_number(text: str | None) -> float | None:
    """``"31.44"`` -> 31.44; ``"270.00 MiB"`` -> 0.2637 (GiB); anything else -> None."""
    if text is None:
        return None
    match = _size().match(text)
    if not match:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return value * _SCALE[match.group(2)] if match.group(3) else value


def parse_transient_if(raw: object, capture_names: set[str]) -> TransientIf | None:
    """Validate a rule's ``transient_if`` mapping; ``capture_names``: names every pattern
    of the rule (or its defaults) provides."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != _KEYS:
        raise EvidenceError(f"must be a mapping with exactly the keys {sorted(_KEYS)}")
    if not all(isinstance(raw[k], str) and raw[k].strip() for k in _KEYS):
        raise EvidenceError("test, cause and fix must be non-empty strings")
    try:
        tree = ast.parse(raw["test"], mode="eval")
    except SyntaxError as exc:
        raise EvidenceError(f"test {raw['test']!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise EvidenceError(f"test {raw['test']!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise EvidenceError(f"test {raw['test']!r}: only numbers may be constants")
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    unknown = names - capture_names
    if unknown:
        raise EvidenceError(f"test {raw['test']!r}: no capture named {sorted(unknown)}")
    return TransientIf(raw["test"], tree, names, raw["cause"].strip(), raw["fix"].strip())


def _evaluate(node: ast.AST, numbers: Mapping[str, float]) -> float | bool:
    if isinstance(node, ast.Constant):
        return cast(float | bool, node.value)  # only numbers pass the load-time check
    if isinstance(node, ast.Name):
        return numbers[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, numbers)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v, numbers) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, numbers), _evaluate(node.right, numbers)
        ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        return ops[type(node.op)] if type(node.op) in ops else left / right
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, numbers)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(comparator, numbers)
            ok = {
                ast.Lt: left < right,
                ast.LtE: left <= right,
                ast.Gt: left > right,
                ast.GtE: left >= right,
            }[type(op)]
            if not ok:
                return False
            left = right
        return True
    raise EvidenceError(f"{type(node).__name__} is not allowed")  # pragma: no cover


# -- provenance ------------------------------------------------------------

PROJECTS = ("vllm", "transformers", "huggingface_hub", "torch")
_PROVENANCE_KEYS = {
    "note",
    "deterministic",
    "deterministic_in",
    "exceptions",
    "functions",
    "modules",
    "packages",
}
_EMPTY: Mapping[str, Category] = MappingProxyType({})
_PROJECT_PATH = re.compile(r"(?:^|[/\\])((?:" + "|".join(PROJECTS) + r")[/\\][^\s\"']+\.py)$")


class Provenance(NamedTuple):
    """The provenance section of a pack (empty when the pack has none)."""

    deterministic: frozenset[str] = frozenset()
    deterministic_in: frozenset[str] = frozenset()
    exceptions: Mapping[str, Category] = _EMPTY
    functions: Mapping[str, Category] = _EMPTY
    modules: Mapping[str, Category] = _EMPTY
    packages: Mapping[str, Category] = _EMPTY
    basenames: Mapping[str, Category] = _EMPTY

    def of_frame(self, path: str, function: str, *, exact: bool = False) -> Category | None:
        """The category of a raise in ``function`` of ``path`` (a project-relative path:
        ``vllm/worker/worker.py``): the function's, else (unless ``exact``) the module's,
        else the nearest package's."""
        found = self.functions.get(f"{path}:{function}")
        if found is not None or exact:
            return found
        found = self.modules.get(path)
        if found is not None:
            return found
        parts = path.split("/")[:-1]
        while parts:
            found = self.packages.get("/".join(parts) + "/")
            if found is not None:
                return found
            parts.pop()
        return None

    def raised_by_own_code(self, path: str) -> bool:
        """Whether ``path`` (project-relative) is in a project whose ``deterministic``
        types fail the same way on every restart (``deterministic_in``: vLLM)."""
        return path.startswith(tuple(f"{p}/" for p in self.deterministic_in))

    def of_log_file(self, basename: str) -> Category | None:
        """The category of vLLM's module named ``basename`` by its log prefix."""
        return self.basenames.get(basename)


def project_path(path: str) -> str | None:
    """``.../site-packages/vllm/worker/worker.py`` -> ``vllm/worker/worker.py``; None for
    a file outside the four projects."""
    match = _PROJECT_PATH.search(path)
    if match is None:
        return None
    rel = match.group(1).replace("\\", "/")
    # The last project folder on the path (a checkout under /work/vllm/vllm/... too).
    for project in PROJECTS:
        at = rel.rfind(f"/{project}/")
        if at > 0:
            return rel[at + 1 :]
    return rel


_CATEGORIES = {category.value: category for category in Category}  # Category(v), faster


def parse_provenance(raw: object, where: str, *, trusted: bool = False) -> Provenance:
    """Validate a ``provenance:`` section; raises ValueError naming the field.
    ``trusted`` (read back from the cache of validated packs): the ~3,400 path names are
    not matched against their shapes again (a fifth of a small log's pack build)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be a mapping")
    unknown = set(raw) - _PROVENANCE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
    names = {}
    for key in ("deterministic", "deterministic_in"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}.{key}: must be a list of names")
        names[key] = frozenset(value)
    if not names["deterministic_in"] <= set(PROJECTS):
        raise ValueError(f"{where}.deterministic_in: projects are {list(PROJECTS)}")
    maps: dict[str, dict[str, Category]] = {}
    for key in ("exceptions", "functions", "modules", "packages"):
        value = raw.get(key, {})
        if not isinstance(value, dict):
            raise ValueError(f"{where}.{key}: must map names to categories")
        maps[key] = {}
        for name, category in value.items():
            found = _CATEGORIES.get(category) if isinstance(category, str) else None
            if found is None:
                raise ValueError(f"{where}.{key}: {name!r}: {category!r} is not a category")
            maps[key][str(name)] = found
    shapes = (
        ("functions", r"^[\w/.]+\.py:[\w.<>]+$"),
        ("modules", r"^[\w/.]+\.py$"),
        ("packages", r"^[\w/.]+/$"),
    )
    if not trusted:
        for key, pattern in shapes:
            bad = [name for name in maps[key] if not re.match(pattern, name)]
            if bad:
                raise ValueError(f"{where}.{key}: {bad[0]!r} is not a project path")
    return Provenance(
        deterministic=names["deterministic"],
        deterministic_in=names["deterministic_in"],
        exceptions=maps["exceptions"],
        functions=maps["functions"],
        modules=maps["modules"],
        packages=maps["packages"],
        basenames=_unique_basenames(maps["modules"]),
    )


def _unique_basenames(modules: dict[str, Category]) -> dict[str, Category]:
    """vLLM's modules by file name (its log prefix names only that), where one name is
    one module."""
    seen: dict[str, list[Category]] = {}
    for path, category in modules.items():
        if path.startswith("vllm/"):
            seen.setdefault(path.rsplit("/", 1)[-1], []).append(category)
    return {name: cats[0] for name, cats in seen.items() if len(cats) == 1}
