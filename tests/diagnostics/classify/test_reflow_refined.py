"""A message a paste reflowed is read whole (diagnostics.classify.findings.refined): when
the reflow cut its opening before the words a specific rule reads, the line alone
matches only a general rule of the same category; the line joined with its
continuation lines is read by the specific one. Built packs, both paths."""

from __future__ import annotations

import textwrap

import pytest

from diagnostics.model import State
from diagnostics.pack.rules import load_pack
from tests.support.packs import both_paths

PACK_YAML = """
rules:
  - id: other-category-specific
    category: other
    permanent: true
    patterns: ['Frob ran out of tokens after \\d+ tries']
    cause: 'other'
    fix: 'other'
  - id: conditional-specific
    category: network
    permanent: false
    patterns: ['Frob ran out of widgets after \\d+ tries']
    when: {traceback_through: ['in never_seen']}
    cause: 'conditional'
    fix: 'conditional'
  - id: specific
    category: network
    permanent: false
    patterns: ['Frob ran out of memory after (?P<tries>\\d+) tries']
    cause: 'specific after {tries} tries'
    fix: 'specific fix'
  - id: general
    category: network
    permanent: false
    patterns: ['FrobError']
    message_lines: 6
    cause: 'general'
    fix: 'general fix'
"""


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("pack")
    (root / "10-frob.yaml").write_text(textwrap.dedent(PACK_YAML))
    return load_pack(root)


def _reflowed(message: str, width: int) -> list[str]:
    return [*textwrap.wrap(message, width), "", "(copied from my phone)"]


@pytest.mark.parametrize("width", [12, 16, 20, 30])
def test_the_specific_rule_reads_a_reflowed_message(pack, width):
    message = "FrobError: Frob ran out of memory after 12 tries while loading the model"
    diagnosis = both_paths(_reflowed(message, width), pack)
    assert (diagnosis.rule, diagnosis.state) == ("specific", State.FAILED_TRANSIENT)
    assert diagnosis.cause == "specific after 12 tries"
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 1


def test_a_message_on_one_line_is_read_as_before(pack):
    assert both_paths(["FrobError: nothing more"], pack).rule == "general"
    whole = "FrobError: Frob ran out of memory after 3 tries"
    assert both_paths([whole], pack).rule == "specific"


@pytest.mark.parametrize(
    "message",
    [
        # another category's reading: the category is the general rule's
        "FrobError: Frob ran out of tokens after 12 tries while loading the model",
        # a rule with conditions the log does not meet
        "FrobError: Frob ran out of widgets after 12 tries while loading the model",
    ],
    ids=["other-category", "conditional"],
)
def test_only_an_unconditional_rule_of_the_same_category_reads_it(pack, message):
    assert both_paths(_reflowed(message, 16), pack).rule == "general"


def test_lines_of_their_own_are_not_a_continuation(pack):
    """A new log record after the line is not its message going on."""
    lines = [
        "FrobError: Frob ran out of",
        "INFO 01-01 00:00:00 [x.py:1] memory after 12 tries",
    ]
    assert both_paths(lines, pack).rule == "general"
