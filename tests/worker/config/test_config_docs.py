"""docs/configuration.md is generated from the code and names every variable the worker reads."""

from __future__ import annotations

import re
import subprocess
import sys
from types import ModuleType

import pytest

from tests.support.scripts import load_script
from tests.support.vllm_env import ROOT
from worker.config import flags as flagmod
from worker.config.settings import WORKER_ENV

DOC = ROOT / "docs" / "configuration.md"


def _generator() -> ModuleType:
    return load_script("gen_config_docs")


def test_config_docs_are_current() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/gen_config_docs.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_table_is_detected() -> None:
    text = DOC.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `VLLM_PORT` |"))
    stale = text.replace(row, row.replace("8000", "8001"))
    generator = _generator()
    assert generator.render(stale) == text
    assert generator.render(text) == text


def test_every_variable_the_worker_reads_is_documented() -> None:
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)", DOC.read_text(encoding="utf-8")))
    expected = (
        WORKER_ENV
        | set(flagmod.ALIASES)
        | set(flagmod.REMOVED_FLAGS)
        | set(flagmod.load_flags().by_env)
        | {"VLLM_EXTRA_ARGS", "VLLM_CONFIG_FILE", "TOKENIZER_REVISION", "HF_TOKEN"}
    )
    assert expected - documented == set()


@pytest.mark.parametrize("name", sorted(flagmod.REMOVED_FLAGS))
def test_each_removed_flag_gets_its_documented_hint(name: str) -> None:
    # The hints are str.format templates ({value}); literal braces must be doubled, or
    # build_args raises KeyError and the worker dies at start instead of warning.
    (warning,) = flagmod.build_args({name: "x"}).warnings
    assert warning.startswith(f"{name} is not a vLLM ")
