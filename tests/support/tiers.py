"""The quick run: the suite without the real-vLLM tests (``-m "not vllm"``), the
developer's loop, with its own time budget (README, "Tests"). The few tests that walk
tables of tens of thousands of cases walk a fixed sample of them in the quick run; the
full run (the README's test command, and CI's) walks them whole. Everything else runs
the same in both."""

from __future__ import annotations

from _pytest.mark.expression import Expression

# Set once per test process by tests/conftest.py's pytest_configure, before collection.
QUICK = False


def leaves_out_vllm(markexpr: str | None) -> bool:
    """Whether a run selected by ``-m markexpr`` leaves out the tests marked ``vllm``."""
    if not markexpr:
        return False
    return not Expression.compile(markexpr).evaluate(lambda name, **_: name == "vllm")


def sample(items: list, every: int) -> list:
    """Every ``every``-th item in the quick run (a fixed sample that keeps the table's
    order, so each part of it is represented); every item in the full run."""
    return items[::every] if QUICK else items


def examples(count: int) -> int:
    """A property test's examples: a third of ``count`` (at least 50) in the quick run,
    ``count`` in the full run."""
    return max(count // 3, 50) if QUICK else count
