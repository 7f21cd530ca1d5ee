"""A whole template that is the opening of a longer one (bitsandbytes' "The input size is
not aligned with the quantized weight shape." and AWQ's, which goes on "This can be
caused by too large tensor parallel size."): the longer one read, cut or reworded, past
the whole one's end for more than a field's value runs to, is the message the text
holds (held-out set NN: AWQ's words ending "... tensor parallelism.")."""

from __future__ import annotations

import json

from diagnostics.model import Category
from diagnostics.pack.catalogue import FORMAT, load_catalogue, parse_catalogue, row_of
from diagnostics.pack.reading import MAX_FIELD

SHORT = "The input size is not aligned with the quantized weight shape."
LONG = SHORT + " This can be caused by too large tensor parallel size."


def _catalogue():
    rows = [
        row_of(SHORT, "model_requirement", True, "ValueError", "vllm/q/bnb.py", "create"),
        row_of(LONG, "bad_config", True, "ValueError", "vllm/q/awq.py", "create"),
    ]
    return parse_catalogue(json.dumps({"format": FORMAT, "entries": rows}).encode())


def test_the_longer_message_reworded_past_the_whole_one_is_read():
    text = f"ValueError: {SHORT} This can be caused by too large tensor parallelism."
    found = _catalogue().lookup(text)
    assert found is not None and not found.whole
    assert found.entry.category is Category.BAD_CONFIG


def test_the_longer_message_cut_past_the_whole_one_is_read():
    found = _catalogue().lookup(f"ValueError: {SHORT} This can be caused by too large ten")
    assert found is not None and found.entry.category is Category.BAD_CONFIG


def test_the_whole_one_stands_when_the_longer_goes_on_no_further_than_a_field():
    for text in (SHORT, f"{SHORT} This can be", f"{SHORT} Please check the checkpoint."):
        found = _catalogue().lookup(f"ValueError: {text}")
        assert found is not None and found.whole, text
        assert found.entry.category is Category.MODEL_REQUIREMENT, text
    # the margin: just past a field's length wins, at it the whole one stands
    past = f"ValueError: {LONG[: len(SHORT) + MAX_FIELD + 2]}"
    assert _catalogue().lookup(past).entry.category is Category.BAD_CONFIG
    at = f"ValueError: {LONG[: len(SHORT) + MAX_FIELD]}"
    assert _catalogue().lookup(at).entry.category is Category.MODEL_REQUIREMENT


def test_the_shipped_catalogue_reads_awqs_words_reworded_as_bad_config():
    text = f"ValueError: {SHORT} This can be caused by too large tensor parallelism."
    found = load_catalogue().lookup(text)
    assert found is not None and found.entry.category is Category.BAD_CONFIG
    plain = load_catalogue().lookup(f"ValueError: {SHORT}")
    assert plain is not None and plain.entry.category is Category.MODEL_REQUIREMENT
