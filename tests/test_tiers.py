"""The quick run is told apart by what ``-m`` selects, not by its spelling."""

from __future__ import annotations

import pytest

from tests.support import tiers


@pytest.mark.parametrize(
    ("markexpr", "quick"),
    [
        ("not vllm", True),
        ("not vllm and not slow", True),
        ("(not vllm)", True),
        ("", False),
        (None, False),
        ("vllm", False),
        ("not slow", False),
        ("vllm or slow", False),
    ],
)
def test_the_quick_run_is_the_one_that_leaves_out_the_real_vllm_tests(markexpr, quick):
    assert tiers.leaves_out_vllm(markexpr) is quick


def test_a_sample_keeps_the_order_and_every_part(monkeypatch):
    items = list(range(20))
    monkeypatch.setattr(tiers, "QUICK", True)
    assert tiers.sample(items, 8) == [0, 8, 16]
    monkeypatch.setattr(tiers, "QUICK", False)
    assert tiers.sample(items, 8) == items


def test_a_property_test_runs_a_third_of_its_examples_in_the_quick_run(monkeypatch):
    monkeypatch.setattr(tiers, "QUICK", True)
    assert (tiers.examples(600), tiers.examples(90)) == (200, 50)
    monkeypatch.setattr(tiers, "QUICK", False)
    assert tiers.examples(600) == 600
