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


def _v1_start(args: str, pid: int) -> list[str]:
    return [
        f"(APIServer pid={pid}) INFO 08-21 15:07:06 [api_server.py:1805] vLLM API server "
        "version 0.10.1.1",
        f"(APIServer pid={pid}) INFO 08-21 15:07:06 [utils.py:326] non-default args: {args}",
    ]


V1_ARGS = (
    "{'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', 'port': 8010, 'model': "
    "'meta-llama/Llama-3.1-8B-Instruct', 'gpu_memory_utilization': 0.55, "
    "'served_model_name': ['llama31']}"
)
ENGINE_CONFIG = (
    "(EngineCore_0 pid=91244) INFO 08-21 15:07:21 [core.py:74] Initializing a V1 LLM engine "
    "(v0.10.1.1) with config: model='meta-llama/Llama-3.1-8B-Instruct', seed=0, "
    "served_model_name=llama31, enable_prefix_caching=True"
)
KV = [
    "(EngineCore_0 pid=91244) ERROR 08-21 15:07:42 [core.py:700] ValueError: To serve at "
    "least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (9.47 GiB).",
    "(APIServer pid=91012) RuntimeError: Engine core initialization failed. See root cause "
    "above. Failed core proc(s): {}",
]


def test_a_crash_loops_next_start_cut_before_its_engine_config_keeps_the_failure():
    """V1's non-default args are one kind of line, the engine's config line (the values
    resolved, written otherwise) another: a restart on the same arguments, cut before its
    engine logged its config, changed nothing (held-out ACJ, stop 58: the arguments were
    compared with the earlier attempt's engine config and read as a change)."""
    lines = [*_v1_start(V1_ARGS, 91012), ENGINE_CONFIG, *KV, *_v1_start(V1_ARGS, 91560)]
    assert both_paths(lines).category is Category.KV_CACHE
    changed = V1_ARGS.replace("0.55", "0.9")
    lines = [*_v1_start(V1_ARGS, 91012), ENGINE_CONFIG, *KV, *_v1_start(changed, 91560)]
    assert both_paths(lines).state is State.STARTING
