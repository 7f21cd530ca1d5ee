"""A failure a person tells of (diagnostics.classify.told): a message quoted in backticks
in a sentence above the log ranks below every cause and structure the output shows and
above a consequence or a shape; alone, it is the report. Built combinations, each
through both paths (the line path and diagnose's file reader)."""

from __future__ import annotations

import io

import pytest

from diagnostics import classify_lines
from diagnostics.classify.told import told
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()
BANNER = "INFO 07-15 02:00:23 [api_server.py:1395] vLLM API server version 0.9.2"
ENDED = "RuntimeError: Engine core initialization failed. See root cause above."
# what a person quotes of an earlier run, by the tier its rule is in
TOLD = {
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "cuda_fault": "RuntimeError: No CUDA GPUs are available",
    "network": (
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Read timed out. (read timeout=10)"
    ),
    "gated_model": (
        "Cannot access gated repo for url "
        "https://huggingface.co/google/gemma-2-9b-it/resolve/main/config.json"
    ),
}
# what the output then shows, each a cause of another category
SHOWN = {
    "bad_config": (
        "ValueError: Total number of attention heads (40) must be divisible by tensor "
        "parallel size (3)."
    ),
    "model_not_found": (
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not "
        "Found for url: https://huggingface.co/api/models/org/nope."
    ),
    "kv_cache": (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of "
        "tokens that can be stored in KV cache (8480). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    ),
}


def verdict(lines: list[str]):
    by_lines = classify_lines(lines, PACK)
    by_file = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert by_file == by_lines
    return by_lines


def sentence(quote: str) -> str:
    return f"Yesterday's run ended with `{quote}` so I changed it. Now it fails like this:"


@pytest.mark.parametrize("shown", sorted(SHOWN))
@pytest.mark.parametrize("said", sorted(TOLD))
def test_the_outputs_cause_beats_a_told_one_of_any_tier(said, shown):
    lines = [sentence(TOLD[said]), "", BANNER, "Traceback (most recent call last):", SHOWN[shown]]
    diagnosis = verdict(lines)
    assert (str(diagnosis.category), diagnosis.evidence.line) == (shown, 5)


@pytest.mark.parametrize("said", sorted(TOLD))
def test_a_told_cause_beats_the_outputs_consequence_and_stands_alone(said):
    for lines in (
        [sentence(TOLD[said])],
        [sentence(TOLD[said]), "", BANNER, "Traceback (most recent call last):", ENDED],
    ):
        diagnosis = verdict(lines)
        assert (str(diagnosis.category), diagnosis.evidence.line) == (said, 1)


def test_the_output_showing_what_was_told_is_the_evidence():
    lines = [sentence(TOLD["network"]), "", BANNER, "Traceback (most recent call last):"]
    diagnosis = verdict([*lines, TOLD["network"]])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("network", 5)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (sentence(TOLD["gated_model"]), True),
        ("first run I got `RuntimeError: No CUDA GPUs are available` lol, now:", True),
        # vLLM's own backticks name a flag or a setting: not a quote
        (SHOWN["kv_cache"], False),
        ("ValueError: set `trust_remote_code=True` to load internlm/internlm2-chat-7b", False),
        # the stretch between two spans (a wrapped line's cut) is no quote
        ("rust_remote_code=True` in LLM or using the `--trust-remote-code` flag", False),
        # a quote at the line's start: no sentence around it
        (f"`{TOLD['gated_model']}`", False),
        # the match outside the quote
        (f"{TOLD['gated_model']} (see `the docs on gated models here`)", False),
    ],
)
def test_a_quote_is_a_message_inside_a_sentence(line, expected):
    rules = [r for r in PACK.rules if any(p.search(line) for p in r.patterns)]
    assert rules, line
    assert told(rules[0].patterns, line) is expected
