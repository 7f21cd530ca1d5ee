"""A rule's message templates: ``[[...]]`` parts said only when the log gave their
numbers (diagnostics.pack.templates), checked when the pack loads and applied when a
verdict is rendered."""

from __future__ import annotations

import textwrap

import pytest

from diagnostics import Classifier
from diagnostics.pack.rules import RulePackError, load_pack
from diagnostics.pack.templates import resolve_optional

TEMPLATE = "it tried to allocate {size}[[ on a GPU with {total} in total]][[ ({free} free)]]."


@pytest.mark.parametrize(
    ("found", "said"),
    [
        ({"size"}, "it tried to allocate {size}."),
        ({"size", "total"}, "it tried to allocate {size} on a GPU with {total} in total."),
        ({"size", "free"}, "it tried to allocate {size} ({free} free)."),
        (
            {"size", "total", "free"},
            "it tried to allocate {size} on a GPU with {total} in total ({free} free).",
        ),
    ],
)
def test_a_part_is_said_only_when_every_capture_it_names_was_found(found, said):
    assert resolve_optional(TEMPLATE, found) == said


def test_a_template_without_parts_is_unchanged():
    assert resolve_optional("ran out ({size}) [x]", set()) == "ran out ({size}) [x]"


PACK = """
rules:
  - id: some-rule
    category: oom
    permanent: true
    patterns:
      - 'out of memory (?P<size>\\d+)(?: of (?P<total>\\d+))?'
      - 'out of memory'
    defaults: {{size: "more"}}
    cause: '{cause}'
    fix: 'lower MAX_MODEL_LEN'
"""


def _pack(tmp_path, cause: str):
    (tmp_path / "10-x.yaml").write_text(textwrap.dedent(PACK.format(cause=cause)))
    return load_pack(tmp_path)


def test_a_capture_named_only_in_a_part_needs_no_default(tmp_path):
    pack = _pack(tmp_path, "ran out of {size}[[ of {total}]]")
    said = [
        Classifier(pack).feed_all([line]).diagnosis().cause
        for line in ("out of memory 3 of 8", "out of memory 3", "out of memory")
    ]
    assert said == ["ran out of 3 of 8", "ran out of 3", "ran out of more"]


@pytest.mark.parametrize(
    ("cause", "error"),
    [
        # outside a part, a capture some pattern lacks still needs a default
        ("ran out of {total}", "'{total}' has no named capture in pattern(s) [2] and no default"),
        # inside one, it must be a capture of some pattern (a typo is never said)
        ("ran out[[ of {totl}]]", "'{totl}' has no named capture in pattern(s) [1, 2]"),
        ("ran out[[ of {total]]", "bad template"),
    ],
)
def test_a_part_naming_what_no_pattern_captures_is_refused(tmp_path, cause, error):
    with pytest.raises(RulePackError, match=None) as info:
        _pack(tmp_path, cause)
    assert error in str(info.value)
