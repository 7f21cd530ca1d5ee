"""A broken rule pack fails on load with one clear error naming file, rule and field."""

from __future__ import annotations

import textwrap

import pytest

from diagnostics.pack.rules import RulePackError, load_pack

GOOD = """
  - id: some-rule
    category: oom
    permanent: true
    patterns: ['out of memory (?P<size>\\d+)']
    cause: 'ran out ({size})'
    fix: 'lower MAX_MODEL_LEN'
"""


def _pack(tmp_path, body: str, name: str = "10-x.yaml"):
    (tmp_path / name).write_text(textwrap.dedent(body))
    return load_pack(tmp_path)


def changed(old: str, new: str) -> str:
    """A pack of ``GOOD`` with ``old`` changed to ``new``."""
    return "rules:" + GOOD.replace(old, new)


def test_a_good_pack_loads(tmp_path):
    pack = _pack(tmp_path, "rules:" + GOOD)
    assert [r.id for r in pack.rules] == ["some-rule"]


def test_an_oom_rule_is_transient_only_where_its_when_places_it(tmp_path):
    """Out of memory is the configuration's (permanent) unless the rule says where it
    ran out such that the memory was others' (a `when` clause)."""
    placed = changed("permanent: true", "permanent: false").replace(
        "    fix:", "    when: {traceback_through: ['in set_device']}\n    fix:"
    )
    assert not _pack(tmp_path, placed).rules[0].permanent
    with pytest.raises(RulePackError, match="category oom is permanent"):
        _pack(tmp_path, changed("permanent: true", "permanent: false"))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("rules: [\n  - id: x\n", "10-x.yaml: invalid YAML"),
        (changed("fix:", "fixx:"), "rule 'some-rule': unknown field(s) ['fixx']"),
        (
            changed("    fix: 'lower MAX_MODEL_LEN'\n", ""),
            "rule 'some-rule': field fix: missing",
        ),
        (
            changed("out of memory (?P<size>\\d+)", "out of (memory"),
            "rule 'some-rule': field patterns: bad regex",
        ),
        (
            changed("category: oom", "category: ooms"),
            "rule 'some-rule': field category: 'ooms' is not one of",
        ),
        (
            changed("permanent: true", "permanent: false"),
            "rule 'some-rule': field permanent: category oom is permanent",
        ),
        (
            changed("({size})", "({bytes})"),
            "rule 'some-rule': field cause: '{bytes}' has no named capture",
        ),
        (changed("id: some-rule", "id: Some_Rule"), "field id: must be kebab-case"),
        ("rules:" + GOOD + GOOD, "rule 'some-rule': field id: duplicate"),
        (
            changed("out of memory (?P<size>\\d+)", "(?<=x)y(?P<size>1)"),
            "rule 'some-rule': field patterns: '(?<=x)y(?P<size>1)': RE2 cannot compile it",
        ),
        (
            changed("out of memory (?P<size>\\d+)", "\\p{Greek}(?P<size>1)"),
            "rule 'some-rule': field patterns: '\\\\p{Greek}(?P<size>1)': pattern not supported by Hyperscan",
        ),
        (
            changed("out of memory (?P<size>\\d+)", "(a)\\1(?P<size>1)"),
            "rule 'some-rule': field patterns: '(a)\\\\1(?P<size>1)': RE2 cannot compile it",
        ),
        (
            changed("({size})", "({size:d})"),
            "rule 'some-rule': field cause: '{size:d}': format specs and conversions are not allowed",
        ),
        (
            changed("({size})", "({size!r})"),
            "rule 'some-rule': field cause: '{size!r}': format specs and conversions are not allowed",
        ),
        (
            changed("({size})", "({size:>999999999})"),
            "rule 'some-rule': field cause: '{size:>999999999}': format specs",
        ),
        (
            changed("({size})", "({size.real})"),
            "rule 'some-rule': field cause: '{size.real}' is not a capture name",
        ),
        (
            changed("    cause:", "    patterns: ['other']\n    cause:"),
            "10-x.yaml: invalid YAML: duplicate key 'patterns'",
        ),
        ("rules: []\nrules: []", "duplicate key 'rules'"),
        ("rulez: []", "unknown top-level key(s) ['rulez']"),
        (
            changed("    cause:", "    when: {inside: [x]}\n    cause:"),
            "rule 'some-rule': field when: allowed keys",
        ),
        (
            changed("    cause:", "    when: {until_progress: 'yes'}\n    cause:"),
            "rule 'some-rule': field when.until_progress: must be true or false",
        ),
        (
            changed("    cause:", "    when: {anywhere: true}\n    cause:"),
            "rule 'some-rule': field when.anywhere: needs when.after (its markers)",
        ),
        (
            "phases:\n  - phase: cooking\n    patterns: [x]\nrules:" + GOOD,
            "phase #1: field phase: 'cooking'",
        ),
        (
            changed("    cause:", "    message_lines: 11\n    cause:"),
            "rule 'some-rule': field message_lines: must be 1 to 10",
        ),
        (
            changed("    cause:", "    message_lines: '8'\n    cause:"),
            "rule 'some-rule': field message_lines: must be 1 to 10",
        ),
    ],
    ids=[
        "yaml",
        "unknown-key",
        "missing-field",
        "bad-regex",
        "category",
        "permanence",
        "template-capture",
        "id-format",
        "duplicate-id",
        "re2-unsupported-lookbehind",
        "hyperscan-unsupported",
        "re2-unsupported-backreference",
        "template-format-spec",
        "template-conversion",
        "template-huge-width",
        "template-attribute",
        "duplicate-patterns-key",
        "duplicate-top-level-key",
        "top-level",
        "when-keys",
        "when-until-progress-type",
        "when-anywhere-without-after",
        "phase-name",
        "message-lines-range",
        "message-lines-type",
    ],
)
def test_broken_pack_names_file_rule_and_field(tmp_path, body, expected):
    with pytest.raises(RulePackError) as info:
        _pack(tmp_path, body)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message
    assert message.startswith("10-x.yaml") or "no *.yaml" in message


def test_missing_pack(tmp_path):
    with pytest.raises(RulePackError, match="no such rule file or folder"):
        load_pack(tmp_path / "nope")


def test_files_load_in_name_order(tmp_path):
    (tmp_path / "20-b.yaml").write_text("rules:" + GOOD.replace("some-rule", "second"))
    (tmp_path / "10-a.yaml").write_text("rules:" + GOOD.replace("some-rule", "first"))
    assert [r.id for r in load_pack(tmp_path).rules] == ["first", "second"]


def test_the_shipped_pack_loads_without_a_path():
    pack = load_pack()
    assert len(pack.rules) > 20
    assert {p.phase for p in pack.phases} == {
        "starting",
        "downloading",
        "loading",
        "ready",
        "serving",
        "recording",
        "stopping",
    }


def test_catastrophic_user_pattern_runs_in_linear_time(tmp_path):
    """(a+)+$ backtracks exponentially in Python's re; RE2 matches it in one pass."""
    from diagnostics.classify.classifier import Classifier

    pack = _pack(
        tmp_path, "rules:" + GOOD.replace("out of memory (?P<size>\\d+)", "(?P<size>(a+)+)$")
    )
    classifier = Classifier(pack)
    for line in ["a" * 36 + "!", "a" * 200_000 + "!", "a" * 50]:
        classifier.feed(line)
    assert classifier.diagnosis().rule == "some-rule"
