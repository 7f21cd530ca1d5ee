"""One line, one reading (docs/diagnostics.md, "How a verdict is chosen"): of the rules
that accept a line, a specific cause whose condition held reads it first, then the
first in pack order. Built packs, so the order of the rules in the pack is the variable;
both paths (the worker's lines, ``diagnose``'s blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnostics.pack.rules import RulePack, load_pack
from tests.support.packs import both_paths

GENERAL = (
    "  - id: general\n    category: network\n    permanent: false\n"
    "    patterns: ['OSError: boom']\n    cause: general\n    fix: retry\n"
)


def _conditioned(kind: str, when: str) -> str:
    return (
        f"  - id: conditioned\n    category: bad_config\n    permanent: true\n"
        f"    kind: {kind}\n    patterns: ['OSError: boom']\n    when: {when}\n"
        "    cause: conditioned\n    fix: change the setting\n"
    )


THROUGH = "{traceback_through: ['in bind_here']}"
AFTER = "{after: ['--host=nowhere']}"


def _pack(tmp_path: Path, rules: list[str]) -> RulePack:
    (tmp_path / "10-rules.yaml").write_text("rules:\n" + "".join(rules))
    return load_pack(tmp_path)


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/srv/app.py", line 3, in bind_here',
    "    raise OSError('boom')",
    "OSError: boom",
]
PLAIN = [
    "Traceback (most recent call last):",
    '  File "/srv/app.py", line 3, in run',
    "OSError: boom",
]


@pytest.mark.parametrize("conditioned_first", [True, False])
@pytest.mark.parametrize(
    ("when", "evidence"), [(THROUGH, TRACEBACK), (AFTER, ["--host=nowhere", *PLAIN])]
)
def test_a_cause_whose_condition_held_reads_the_line_wherever_it_sits(
    tmp_path, conditioned_first, when, evidence
):
    rules = [_conditioned("cause", when), GENERAL]
    pack = _pack(tmp_path, rules if conditioned_first else rules[::-1])
    assert both_paths(evidence, pack).rule == "conditioned"
    # without the evidence its condition names, the general rule reads the line
    assert both_paths(PLAIN, pack).rule == "general"


@pytest.mark.parametrize("kind", ["structure", "consequence"])
def test_a_conditioned_rule_of_another_kind_keeps_the_packs_order(tmp_path, kind):
    """Only a specific cause claims before the pack's order: a generic rule's condition
    (an exception family raised through some module) says less than a rule that names
    the message."""
    pack = _pack(tmp_path, [GENERAL, _conditioned(kind, THROUGH)])
    assert both_paths(TRACEBACK, pack).rule == "general"
    pack = _pack(tmp_path, [_conditioned(kind, THROUGH), GENERAL])
    assert both_paths(TRACEBACK, pack).rule == "conditioned"
