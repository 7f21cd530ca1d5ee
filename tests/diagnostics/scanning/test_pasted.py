"""A paste read whole (diagnostics.scanning.pasted): attempts pasted newest first are read
in the order they ran, by the times their start lines show, so that the attempt that
ran last decides (a paste in order, or whose starts show no time, is read as pasted);
a setting the paste shows after the failure is the environment the start ran in."""

from __future__ import annotations

import io

import pytest

from diagnostics import classify_lines
from diagnostics.formats.order import newest_first, start_time
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()


def start(time: str) -> list[str]:
    return [
        f"INFO 09-02 {time} api_server.py:206] vLLM API server version 0.5.1",
        f"INFO 09-02 {time} api_server.py:207] args: Namespace(model='org/m', port=8000)",
    ]


KV = [
    "Traceback (most recent call last):",
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
    "that can be stored in KV cache (8480). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine.",
]
GATED = [
    "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for "
    "url https://huggingface.co/org/m/resolve/main/config.json.",
]
READY = [
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
]


def diagnose(lines: list[str]):
    return classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)


def test_the_newest_attempt_on_top_decides():
    """The user put the latest try on top: its failure is the verdict, its evidence
    numbered as pasted; pasted in order, the last one decides as always."""
    lines = [
        "latest run on top:",
        *start("14:08:51"),
        *KV,
        "----- before -----",
        *start("13:57:20"),
        *GATED,
    ]
    diagnosis = diagnose(lines)
    assert str(diagnosis.category) == "kv_cache" and diagnosis.evidence is not None
    assert diagnosis.evidence.line == 5 and lines[4] == diagnosis.evidence.text
    in_order = [*start("13:57:20"), *GATED, *start("14:08:51"), *KV]
    assert str(diagnose(in_order).category) == "kv_cache"


def test_a_newest_attempt_that_came_up_is_ready_though_an_older_one_failed_below():
    lines = ["works now:", *start("09:44:02"), *READY, "earlier:", *start("09:31:50"), *GATED]
    assert not diagnose(lines).failed
    # the same times the other way round: the failure ran last
    assert str(diagnose([*start("09:31:50"), *READY, *start("09:44:02"), *GATED]).category) == (
        "gated_model"
    )


def test_attempts_without_times_are_read_as_pasted():
    untimed = [
        "INFO:     vLLM API server version 0.5.1",
        "Traceback (most recent call last):",
        *KV,
        "INFO:     vLLM API server version 0.5.1",
        *GATED,
    ]
    assert str(diagnose(untimed).category) == "gated_model"


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        (["14:08:51", "14:08:51", "13:57:20", "13:57:20"], [0, 2]),  # one start's two markers
        (["14:08:51", "14:09:30", "13:57:20"], [0, 2]),  # its next marker seconds later
        (["13:57:20", "14:08:51"], None),  # in order
        (["14:08:51", "13:57:20", "15:00:00"], None),  # neither order
        (["14:08:51"], None),
    ],
)
def test_the_order_is_read_from_the_start_times(times, expected):
    marks = [
        (n, f"INFO 09-02 {time} x.py:1] vLLM API server version".encode())
        for n, time in enumerate(times)
    ]
    assert newest_first(marks) == expected


def test_a_year_turning_is_in_order_and_a_start_without_a_time_says_nothing():
    december, january = b"INFO 12-31 23:59:10 x.py:1] v", b"INFO 01-01 00:01:02 x.py:1] v"
    assert newest_first([(0, december), (1, january)]) is None
    assert newest_first([(0, b"INFO 09-02 14:08:51 x.py:1] v"), (1, b"vLLM API server")]) is None
    assert start_time(b"2025-02-11T16:44:04Z vllm | INFO 02-11 16:44:04 x") == start_time(
        b"INFO 02-11 16:44:04 x"
    )


OFFLINE_MISS = [
    "INFO 05-19 02:11:44 [api_server.py:1043] vLLM API server version 0.8.5.post1",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/vllm/transformers_utils/config.py", line 286, in get_config',
    "    raise ValueError(",
    "ValueError: Invalid repository ID or local directory specified: 'google/gemma-3-12b-it'.",
    "srun: error: gpu-a100-017: task 0: Exited with exit code 1",
]


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_hub_switched_off_counts_wherever_the_paste_shows_it(where):
    """HF_HUB_OFFLINE=1 in an environment dump pasted below the log, as above it: the
    lookup's failure is an offline cache miss (network, transient), not a missing repo;
    through both paths (the line path reads it again knowing the setting too)."""
    env = ["--- env ---", "HF_HOME=/home/u/.cache/huggingface", "HF_HUB_OFFLINE=1"]
    lines = [*env, *OFFLINE_MISS] if where == "before" else [*OFFLINE_MISS, *env]
    for diagnosis in (diagnose(lines), classify_lines(lines, PACK)):
        assert (diagnosis.rule, diagnosis.permanent) == ("hub-lookup-offline", False)
        assert (
            diagnosis.evidence is not None
            and diagnosis.evidence.line == lines.index(OFFLINE_MISS[4]) + 1
        )
    # without the setting, or with it switched on, the repo is missing
    for shown in ([], ["HF_HUB_OFFLINE=0"]):
        assert str(diagnose([*OFFLINE_MISS, *shown]).category) == "model_not_found"


WEIGHTS_MISSING = [
    "INFO 05-14 03:40:54 [gpu_model_runner.py:1329] Starting to load model /models/q...",
    "ERROR 05-14 03:41:04 [core.py:396] ValueError: Following weights were not initialized "
    "from checkpoint: {'model.layers.47.mlp.down_proj.weight'}",
]


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_download_left_unfinished_counts_wherever_the_paste_shows_it(where):
    """An ls of the model's folder showing a file huggingface_hub left unfinished
    (".incomplete"), below or above the failure: the weights are missing because the
    download stopped, network and transient; without it, the checkpoint's layout."""
    ls = [
        "$ ls -la /models/q/.cache/huggingface/download",
        "-rw-r--r-- 1 root root 1.2G May 14 03:12 model-00008-of-00008.safetensors.8c1d6f2e.incomplete",
    ]
    lines = [*ls, *WEIGHTS_MISSING] if where == "before" else [*WEIGHTS_MISSING, *ls]
    for diagnosis in (diagnose(lines), classify_lines(lines, PACK)):
        assert (diagnosis.rule, diagnosis.permanent) == ("weights-left-incomplete", False)
    assert diagnose(WEIGHTS_MISSING).rule == "checkpoint-does-not-match-model"


def test_a_setting_shown_late_reads_only_what_its_rule_reads():
    """The setting shown after a failure its rule does not read (the engine's memory)
    changes nothing."""
    lines = [*start("14:08:51"), *KV, "HF_HUB_OFFLINE=1"]
    assert diagnose(lines).rule == classify_lines(lines, PACK).rule == diagnose(lines[:-1]).rule


def test_an_older_attempt_pasted_below_begins_at_the_prompt_that_ran_it():
    """Each attempt pasted with its prompt ("$ vllm serve ..."): read in the order they
    ran, the older prompt goes with its run, not after the newest failure (where it would
    read as the user running vLLM again)."""
    newest = [
        "(newest on top)",
        "$ vllm serve org/m --max-model-len 16384",
        *start("19:02:58"),
        *KV,
    ]
    older = ["------ previous run ------", "$ vllm serve org/m", *start("18:51:12"), *READY]
    diagnosis = diagnose([*newest, *older])
    assert str(diagnosis.category) == "kv_cache" and diagnosis.evidence is not None
    assert diagnosis.evidence.line == 6
