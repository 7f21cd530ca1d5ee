"""Of several attempts, a last one that names no cause of its own (still under way, or
ended by a consequence) keeps the earlier failure, unless that failure was answered
before it: the last attempt got further than the phase the failure stopped the earlier
one in, or a setting both attempts log on the same kind of line has another value
(diagnostics.classify.chosen.went_further). Built combinations through both paths."""

from __future__ import annotations

import pytest

from diagnostics.model import Category, State
from tests.support.packs import both_paths


def _start(settings: str, minute: int = 0) -> list[str]:
    return [
        f"INFO 07-29 11:{minute:02d}:44 api_server.py:219] vLLM API server version 0.5.3",
        f"INFO 07-29 11:{minute:02d}:44 api_server.py:220] args: Namespace({settings})",
    ]


LOADING = [
    "INFO 07-29 11:02:47 model_runner.py:680] Starting to load model /models/m...",
    "Loading safetensors checkpoint shards:  57% Completed | 17/30 [00:19<00:15,  1.17s/it]",
]
DOWNLOADING = [
    "INFO 05-13 16:43:56 weight_utils.py:199] Using model weights format ['*.safetensors']",
    "model-00001-of-00004.safetensors:   4%|▍         | 199M/4.98G [00:04<01:39, 48.2MB/s]",
]
OOM = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 301.06 MiB is free."
]
GATED = [
    "OSError: You are trying to access a gated repo.",
    "Access to model meta-llama/Meta-Llama-3-8B-Instruct is restricted. You must be "
    "authenticated to access it.",
]
SEVENTY = "model='meta-llama/Meta-Llama-3-70B-Instruct', max_model_len=8192, quantization=None"
AWQ = "model='casperhansen/llama-3-70b-instruct-awq', max_model_len=8192, quantization='awq'"


def test_a_change_of_settings_after_the_failure_leaves_the_last_attempt_under_way():
    lines = [*_start(SEVENTY), *LOADING, *OOM, *_start(AWQ, 6), *LOADING]
    assert both_paths(lines).state is State.LOADING


def test_the_same_settings_keep_the_failure_a_crash_loop_repeats():
    lines = [*_start(SEVENTY), *LOADING, *OOM, *_start(SEVENTY, 6), *LOADING]
    assert both_paths(lines).category is Category.OOM


def test_an_elided_setting_is_not_a_change():
    elided = "model='meta-llama/Meta-Llama-3-70B-Instruct', ..."
    lines = [*_start(SEVENTY), *LOADING, *OOM, *_start(elided, 6), *LOADING]
    assert both_paths(lines).category is Category.OOM


def test_a_last_attempt_that_got_further_leaves_it_under_way():
    """Refused the config at the start; the next attempt downloads the weights: the
    token came."""
    lines = [*_start(SEVENTY), *GATED, *_start(SEVENTY, 6), *DOWNLOADING]
    assert both_paths(lines).state is State.DOWNLOADING


def test_a_last_attempt_not_as_far_keeps_the_failure():
    lines = [*_start(SEVENTY), *LOADING, *OOM, *_start(SEVENTY, 6), *DOWNLOADING]
    assert both_paths(lines).category is Category.OOM


def test_a_last_attempt_killed_after_a_change_is_that_kill():
    lines = [*_start(SEVENTY), *LOADING, *OOM, *_start(AWQ, 6), *LOADING, "Killed"]
    verdict = both_paths(lines)
    assert (verdict.category, verdict.state) == (Category.OTHER, State.FAILED_TRANSIENT)


@pytest.mark.parametrize(
    "report",
    [
        ["    Last State:     Terminated", "      Reason:       OOMKilled"],
        OOM,
    ],
    ids=["kubectl-describe", "torch"],
)
def test_a_failure_above_any_start_keeps_its_verdict(report):
    """Where a failure above the first start stopped its attempt is not known (kubectl
    describe's report of the container whose log follows, cut short while loading)."""
    lines = [*report, *_start(SEVENTY, 6), *LOADING]
    assert both_paths(lines).category is Category.OOM


def test_the_engines_config_line_is_not_compared_with_the_arguments():
    """The config line logs values resolved (dtype=torch.bfloat16 for the argument's
    'auto'): a kind of line is compared only with the same kind."""
    config = (
        "INFO 07-29 11:02:46 llm_engine.py:176] Initializing an LLM engine (v0.5.3) with "
        "config: model='meta-llama/Meta-Llama-3-70B-Instruct', dtype=torch.bfloat16"
    )
    args = "model='meta-llama/Meta-Llama-3-70B-Instruct', dtype='auto'"
    lines = [*_start(args), config, *LOADING, *OOM, *_start(args, 6), *LOADING]
    assert both_paths(lines).category is Category.OOM
