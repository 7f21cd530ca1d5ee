"""A tokenizer class transformers cannot find: one of its own (shipped by a release,
under any spelling) is what this transformers cannot run (model_requirement); one no
release ships is the repository's own code (remote_code). The classes are data mined
from the releases (scripts/gen_tokenizer_rule.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.packs import both_paths
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((ROOT / "fixtures" / "catalogue" / "tokenizer-classes.json").read_text())

WORDINGS = [
    "ValueError: Tokenizer class {cls} does not exist or is not currently imported.",
    "ValueError: Tokenizer class {cls} is not currently imported.",
    "ValueError: Tokenizer class '{cls}' specified in the tokenizer config was not found.",
]
# vLLM's own reading of it, raised from it when trust_remote_code is off
VLLM_HINT = [
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not "
    "yet available in the HuggingFace transformers library, consider setting "
    "`trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI.",
]
CASES = [
    ("QWenTokenizer", "remote_code"),
    ("ChatGLM4Tokenizer", "remote_code"),
    ("InternLM2Tokenizer", "remote_code"),
    ("BaichuanTokenizer", "remote_code"),
    ("Qwen2Tokenizer", "model_requirement"),  # newer than an old transformers
    ("GemmaTokenizerFast", "model_requirement"),
    ("LLaMATokenizer", "model_requirement"),  # an older spelling of LlamaTokenizer
]


def test_the_generated_rule_is_current_and_the_data_spans_the_releases(capsys):
    assert load_script("gen_tokenizer_rule").main(["--check"]) == 0, capsys.readouterr().out
    assert {"LlamaTokenizer", "Qwen2Tokenizer", "PreTrainedTokenizerFast"} <= set(DATA["classes"])
    assert DATA["releases"][0].startswith("4.") and DATA["releases"][-1].startswith("5.")


@pytest.mark.parametrize(("cls", "category"), CASES)
@pytest.mark.parametrize("hint", [False, True], ids=["alone", "with vLLM's hint"])
def test_a_class_transformers_never_shipped_is_the_repositorys_code(cls, category, hint):
    for wording in WORDINGS:
        lines = ["Traceback (most recent call last):", wording.format(cls=cls)]
        diagnosis = both_paths(lines + (VLLM_HINT if hint else []))
        assert (str(diagnosis.category), diagnosis.permanent) == (category, True), (
            wording,
            diagnosis.rule,
        )
        assert cls in (diagnosis.cause or "")
