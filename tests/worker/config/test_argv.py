"""``last_value``: a flag's value in a `vllm serve` argument list, as argparse reads it."""

from __future__ import annotations

import pytest

from worker.config.argv import last_value


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--revision", "v1"], "v1"),
        (["--revision=v1"], "v1"),
        (["--revision", "v1", "--revision=v2"], "v2"),
        (["--revision=v1", "--revision", "v2"], "v2"),
        (["--model", "m"], None),
        (["--revision"], None),
        (["--revision", "v1", "--revision"], "v1"),
        (["--revision=", "x"], ""),
    ],
)
def test_the_last_value_wins(args: list[str], expected: str | None) -> None:
    assert last_value(args, "--revision") == expected


def test_an_underscore_in_a_name_reads_as_a_dash() -> None:
    assert last_value(["--max_model_len", "4096"], "--max-model-len") == "4096"


def test_a_boolean_flag_takes_no_value() -> None:
    args = ["--enforce-eager", "--model", "m"]
    assert last_value(args, "--enforce-eager", boolean=True) == "true"
    assert last_value(args, "--enforce-eager") == "--model"
    assert last_value(["--enforce-eager=false"], "--enforce-eager", boolean=True) == "false"
