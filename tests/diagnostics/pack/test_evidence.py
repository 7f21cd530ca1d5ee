"""A rule's ``transient_if`` test, evaluated directly (diagnostics.pack.evidence)."""

import pytest

from diagnostics.pack.evidence import EvidenceError, as_number, parse_transient_if

NAMES = {"total", "free", "this", "allocated", "unallocated"}
TEST = (
    "(total - free - this) / total > 0.2 or (total - free - allocated - unallocated) / total > 0.2"
)


def _test(test: str = TEST):
    made = parse_transient_if({"test": test, "cause": "c", "fix": "f"}, NAMES)
    assert made is not None
    return made


@pytest.mark.parametrize(
    ("values", "holds"),
    [
        # each form of the message decides by its own numbers
        ({"total": "80 GiB", "free": "1 GiB", "this": "70 GiB"}, False),
        ({"total": "80 GiB", "free": "1 GiB", "this": "40 GiB"}, True),
        (
            {"total": "80 GiB", "free": "1 GiB", "allocated": "60 GiB", "unallocated": "512 MiB"},
            True,
        ),
        (
            {"total": "80 GiB", "free": "1 GiB", "allocated": "70 GiB", "unallocated": "512 MiB"},
            False,
        ),
        # a branch without its numbers is false, not the whole test: either form decides
        (
            {
                "total": "80 GiB",
                "free": "1 GiB",
                "this": "unknown",
                "allocated": "40 GiB",
                "unallocated": "0 GiB",
            },
            True,
        ),
        # no branch has its numbers: false (the rule's own permanence stands)
        ({"total": "80 GiB", "free": "1 GiB"}, False),
        ({}, False),
        # a branch that divides by zero is false too
        ({"total": "0 GiB", "free": "0 GiB", "this": "0 GiB"}, False),
    ],
)
def test_each_branch_of_or_is_judged_on_its_own_numbers(values, holds):
    assert _test().holds(values) is holds


def test_and_needs_every_number():
    test = _test("free / total < 0.5 and this > 1")
    assert test.holds({"free": "1 GiB", "total": "80 GiB", "this": "2 GiB"})
    assert not test.holds({"free": "1 GiB", "total": "80 GiB"})
    assert not _test("not this > 1").holds({})


def test_sizes_read_in_gib():
    assert as_number("512 MiB") == 0.5
    assert as_number("2 TiB") == 2048
    assert as_number("31.44") == 31.44
    assert as_number("0 bytes") == 0.0  # torch's format under 1 KiB
    assert as_number("512 bytes") == 512 / 1024**3
    assert as_number("unknown") is None


@pytest.mark.parametrize("test", ["total ** 2 > 1", "__import__('os')", "nope > 1", "'a' < 'b'"])
def test_a_test_outside_the_language_is_refused(test):
    with pytest.raises(EvidenceError):
        parse_transient_if({"test": test, "cause": "c", "fix": "f"}, NAMES)
