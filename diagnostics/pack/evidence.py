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
stands). A branch of ``or`` is judged on its own numbers: one whose numbers are missing
is false and the others still decide (a message printed in several forms, each with
its own figures: ``this > 0 or reserved > 0`` reads whichever the message gave).

The pack's provenance section (where an exception was raised -> a category) is read
by :mod:`diagnostics.pack.provenance`; its names stay importable from here.
"""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, NamedTuple, cast

from diagnostics.pack.provenance import (
    PROJECTS,
    REPOSITORY_CODE,
    Provenance,
    parse_provenance,
    project_path,
)

if TYPE_CHECKING:
    import ast

__all__ = [
    "PROJECTS",
    "REPOSITORY_CODE",
    "EvidenceError",
    "Provenance",
    "TransientIf",
    "as_number",
    "parse_provenance",
    "parse_transient_if",
    "project_path",
]

_KEYS = {"test", "cause", "fix"}
_SCALE = {"": 1.0, "K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}
_ALLOWED = (  # the names of the ast classes a test may hold
    "Expression",
    "BoolOp",
    "And",
    "Or",
    "UnaryOp",
    "Not",
    "USub",
    "BinOp",
    "Add",
    "Sub",
    "Mult",
    "Div",
    "Compare",
    "Lt",
    "LtE",
    "Gt",
    "GtE",
    "Name",
    "Load",
    "Constant",
)


class EvidenceError(ValueError):
    """A ``transient_if`` entry that cannot be used (reported by the pack loader)."""


class TransientIf(NamedTuple):
    """A test over captured numbers, and the cause/fix to give when it holds. The test is
    parsed on first use (a pack read back from the cache of validated packs imports no
    ``ast`` for a log none of its tests is asked about)."""

    test: str
    cause: str
    fix: str

    @property
    def tree(self) -> "ast.Expression":
        return _tree(self.test)

    @property
    def names(self) -> frozenset[str]:
        """The capture names the test reads."""
        return _names(self.test)

    def holds(self, values: Mapping[str, str]) -> bool:
        numbers = {}
        for name in self.names:
            number = as_number(values.get(name))
            if number is not None:
                numbers[name] = number
        return _branch(self.tree.body, numbers)


@cache
def _size() -> re.Pattern[str]:  # compiled on first use: few logs hold a transient_if's line
    return re.compile(r"^\s*(-?[\d.]+)\s*(?:([KMGT]?)(i?B)|(bytes?))?\s*$")


def as_number(text: str | None) -> float | None:
    """``"31.44"`` -> 31.44; ``"270.00 MiB"`` -> 0.2637 (GiB), ``"0 bytes"`` -> 0.0 (GiB);
    anything else -> None."""
    if text is None:
        return None
    match = _size().match(text)
    if not match:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    if match.group(4):  # torch's format for what is under 1 KiB ("0 bytes is free")
        return value / 1024**3
    return value * _SCALE[match.group(2)] if match.group(3) else value


def parse_transient_if(
    raw: object, capture_names: set[str], *, trusted: bool = False
) -> TransientIf | None:
    """Validate a rule's ``transient_if`` mapping; ``capture_names``: names every pattern
    of the rule (or its defaults) provides. ``trusted`` (read back from the cache of
    validated packs): the test is not parsed and checked again."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != _KEYS:
        raise EvidenceError(f"must be a mapping with exactly the keys {sorted(_KEYS)}")
    if not all(isinstance(raw[k], str) and raw[k].strip() for k in _KEYS):
        raise EvidenceError("test, cause and fix must be non-empty strings")
    if not trusted:
        import ast

        try:
            tree = _tree(raw["test"])
        except SyntaxError as exc:
            raise EvidenceError(f"test {raw['test']!r}: {exc.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, tuple(getattr(ast, name) for name in _ALLOWED)):
                raise EvidenceError(f"test {raw['test']!r}: {type(node).__name__} is not allowed")
            if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
                raise EvidenceError(f"test {raw['test']!r}: only numbers may be constants")
        unknown = _names(raw["test"]) - capture_names
        if unknown:
            raise EvidenceError(f"test {raw['test']!r}: no capture named {sorted(unknown)}")
    return TransientIf(raw["test"], raw["cause"].strip(), raw["fix"].strip())


@cache
def _tree(test: str) -> "ast.Expression":
    import ast

    return ast.parse(test, mode="eval")


@cache
def _names(test: str) -> frozenset[str]:
    import ast

    return frozenset(n.id for n in ast.walk(_tree(test)) if isinstance(n, ast.Name))


class _Missing(LookupError):
    """A name the test reads that the message did not give (or not as a number)."""


def _branch(node: "ast.AST", numbers: Mapping[str, float]) -> bool:
    """A test, or a branch of ``or``: false when its numbers are missing or it divides
    by zero."""
    try:
        return bool(_evaluate(node, numbers))
    except (ZeroDivisionError, _Missing):
        return False


def _evaluate(node: "ast.AST", numbers: Mapping[str, float]) -> float | bool:
    import ast  # imported once the test was parsed: a lookup

    if isinstance(node, ast.Constant):
        return cast(float | bool, node.value)  # only numbers pass the load-time check
    if isinstance(node, ast.Name):
        if node.id not in numbers:
            raise _Missing(node.id)
        return numbers[node.id]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, numbers)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_evaluate(v, numbers) for v in node.values)
        return any(_branch(v, numbers) for v in node.values)
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
