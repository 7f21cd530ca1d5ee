"""A catalogued message whose line lost its start (a screenshot cropped, a quote begun
mid-line: no rule reads it, its opening words are gone) names the cause of a failure
that was otherwise called other without one: a consequence, generic structure or the
log's shape (diagnostics.classify.unmatched.with_cut_message). Built combinations, read
through both paths; the catalogue's own reading of every message so is
tests/diagnostics/classify/test_catalogue_lookup.py's."""

from __future__ import annotations

import pytest

from diagnostics.model import Category, State
from tests.support.packs import both_paths

# vLLM's own messages, each with its opening words cut off (held-out QZ's shapes).
KV = (
    "en (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache "
    "memory (9.34 GiB). Based on the available memory, the estimated maximum model length "
    "is 76480. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine."
)
MAX_LEN = (
    "ength (65536) is greater than the derived max_model_len (max_position_embeddings=32768 "
    "or model_max_length=None in model's config.json). This may lead to incorrect model "
    "outputs or CUDA errors. To allow overriding this maximum, set the env var "
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
)
CUT = {"kv": (KV, Category.KV_CACHE), "max-len": (MAX_LEN, Category.BAD_CONFIG)}

# What comes with them and names no cause: a consequence, a traceback's shape, the
# shell's kill.
WRAPPER = "ERROR 07-08 16:40:12 [core.py:586] EngineCore failed to start."
RAISE = ["Traceback (most recent call last):", "    raise ValueError("]
KILLED = "Killed"
LOADING = "INFO 05-02 11:01:02 model_runner.py:1008] Starting to load model /models/llama-3-8b..."
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 1.02 GiB is free."
)


@pytest.mark.parametrize("cut", CUT, ids=CUT)
@pytest.mark.parametrize(
    "shape",
    [
        lambda m: [WRAPPER, "...", m],
        lambda m: [*RAISE, m],
        lambda m: [m, KILLED],
        lambda m: [LOADING, WRAPPER, "> " + m, "> any idea? 24GB card"],
    ],
    ids=["wrapper-above", "raise-line-above", "killed-below", "quoted"],
)
def test_a_message_that_lost_its_start_names_the_cause(cut, shape):
    message, category = CUT[cut]
    verdict = both_paths(shape(message))
    assert (verdict.category, verdict.state) == (category, State.FAILED_PERMANENT)
    assert verdict.evidence is not None and message in verdict.evidence.text
    assert "the log shows its end" in verdict.cause


@pytest.mark.parametrize("cut", CUT, ids=CUT)
def test_the_line_number_is_the_messages(cut):
    message, _ = CUT[cut]
    lines = [LOADING, "", WRAPPER, "...", "", message, "", KILLED]
    verdict = both_paths(lines)
    assert verdict.evidence is not None and verdict.evidence.line == lines.index(message) + 1


@pytest.mark.parametrize("cut", CUT, ids=CUT)
def test_a_named_cause_stays(cut):
    """A specific cause (here the GPU's memory) is chosen over it, wherever it is."""
    message, _ = CUT[cut]
    for lines in ([message, "Traceback (most recent call last):", OOM], [OOM, message]):
        assert both_paths(lines).category is Category.OOM


@pytest.mark.parametrize("cut", CUT, ids=CUT)
def test_a_start_under_way_after_it_leaves_the_verdict(cut):
    """A start that went on after it (a load begun) was not ended by it."""
    message, _ = CUT[cut]
    verdict = both_paths([message, LOADING, WRAPPER])
    assert (verdict.category, verdict.rule) == (Category.OTHER, "engine-wrapper")
    assert not both_paths([message, LOADING]).failed


def test_a_message_whole_or_cut_at_both_ends_is_not_read_so():
    """The whole message on a line with no exception class, or one that lost its end
    too, is not read by this step (the rules and the exception line read whole ones;
    a text cut at both ends names too little)."""
    whole = "User-specified max_model_len (65536)" + MAX_LEN[len("ength (65536)") :]
    assert "the log shows its end" not in (both_paths([WRAPPER, whole]).cause or "")
    assert both_paths([WRAPPER, MAX_LEN[:120]]).category is Category.OTHER
