"""A platform's report that a run ended (docker compose's "vllm-1 exited with code 1",
RunPod's "worker exited with exit code 1", supervisord's, systemd's, honcho's, an IDE's)
ends the run whose failure came before it: the process or container ran again after it,
and that later run's own cause is the verdict, whatever the earlier one was
(diagnostics.attempts.last.after_run_ended). Built combinations through both paths,
and the file path's backward search against a line-by-line reading."""

from __future__ import annotations

import io
import random

import pytest

from diagnostics.attempts.last import is_run_end
from diagnostics.model import Category, State
from diagnostics.scanning import attemptseek
from diagnostics.scanning.attemptseek import last_run_ends
from tests.support.packs import both_paths, shipped_pack

ENDS = {
    "compose": ["vllm-1 exited with code 1"],
    "runpod": ["2024-10-02 14:53:35.007 [info] worker exited with exit code 1"],
    "supervisord": ["2024-05-01 10:00:03,114 WARN exited: vllm (exit status 1; not expected)"],
    "supervisord-killed": [
        "2024-09-12 14:32:11,902 INFO exited: vllm (terminated by SIGKILL; not expected)"
    ],
    "systemd": [
        "May 01 10:00:03 gpu1 systemd[1]: vllm.service: Main process exited, code=exited, "
        "status=1/FAILURE",
        "May 01 10:00:03 gpu1 systemd[1]: vllm.service: Failed with result 'exit-code'.",
    ],
    "honcho": ["10:00:03 system | vllm.1 stopped (rc=1)"],
    "ide": ["Process finished with exit code 1"],
    # a shell prompt printing another log: another recording begins
    "kubectl-logs": ["$ kubectl -n llm-prod logs llama-vllm-0 --previous"],
    "docker-logs": ["user@gpu-box:~$ docker logs vllm 2>&1 | tail -n 40"],
    "journalctl": ["$ sudo journalctl -u vllm --since today"],
    "cat-log": ["$ cat /var/log/vllm/server.log"],
}
EARLIER = {
    "gated": (
        [
            "OSError: You are trying to access a gated repo.",
            "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have "
            "access to it and be authenticated to access it. Please log in.",
        ],
        Category.GATED_MODEL,
    ),
    "disk": (["OSError: [Errno 28] No space left on device"], Category.OTHER),
    "network": (
        [
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
            "port=443): Max retries exceeded with url: /api/models/x (Caused by "
            "NameResolutionError(\"Failed to resolve 'huggingface.co'\"))"
        ],
        Category.NETWORK,
    ),
}
LATER = [
    "INFO 10-02 15:09:34 api_server.py:839] vLLM API server version 0.6.0",
    "api_server.py: error: argument --tool-call-parser: invalid choice: 'llama3_json' "
    "(choose from 'mistral', 'hermes')",
]
LOADING = "INFO 10-02 15:09:40 model_runner.py:1008] Starting to load model /models/x..."


@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("earlier", EARLIER)
def test_the_run_after_the_report_decides(end, earlier):
    failure, _ = EARLIER[earlier]
    lines = [*failure, *ENDS[end], *LATER, *ENDS[end]]
    verdict = both_paths(lines)
    assert verdict.category is Category.BAD_CONFIG
    assert verdict.evidence is not None
    assert verdict.evidence.line == len(failure) + len(ENDS[end]) + 2


@pytest.mark.parametrize("end", ENDS)
def test_a_last_run_cut_short_leaves_the_earlier_failure(end):
    failure, category = EARLIER["gated"]
    lines = [*failure, *ENDS[end], LATER[0], LOADING]
    assert both_paths(lines).category is category
    lines = [*failure, *ENDS[end], *ENDS[end], LATER[0]]  # nothing of its own either
    assert both_paths(lines).category is category


@pytest.mark.parametrize("end", ["compose", "runpod", "systemd"])
def test_a_restart_loading_the_model_after_a_network_failure_is_under_way(end):
    """The network failed, the platform restarted vLLM, and the next run is loading the
    model (the hub answered it; held-out UQ): under way. Cut before it loads, or after
    a failure the network cannot have caused, the failure stands."""
    failure, _ = EARLIER["network"]
    lines = [*failure, *ENDS[end], LATER[0], LOADING]
    assert both_paths(lines).state is State.LOADING
    assert both_paths([*failure, *ENDS[end], LATER[0]]).category is Category.NETWORK
    gated, category = EARLIER["gated"]
    assert both_paths([*gated, *ENDS[end], LATER[0], LOADING]).category is category


def test_the_run_before_a_last_one_cut_short_decides():
    failure, _ = EARLIER["disk"]
    end = ENDS["compose"]
    lines = [*failure, *end, *LATER, *end, LATER[0], LOADING]
    assert both_paths(lines).category is Category.BAD_CONFIG


def test_a_web_uis_errors_after_vllm_exited_are_not_another_run():
    """A compose service that is not vLLM's goes on after vLLM's exit: its complaints
    are what vLLM's failure caused, not a later run of vLLM."""
    lines = [
        "vllm-1        | INFO 10-02 15:09:34 api_server.py:839] vLLM API server version 0.6.0",
        "vllm-1        | OSError: You are trying to access a gated repo.",
        "vllm-1 exited with code 1",
        "open-webui-1  | ERROR [open_webui.routers.openai] Connection error: Cannot connect "
        "to host vllm:8000 ssl:default [Name or service not known]",
        "open-webui-1  | requests.exceptions.ConnectionError: HTTPConnectionPool(host='vllm', "
        "port=8000): Max retries exceeded with url: /v1/models",
    ]
    assert both_paths(lines).category is Category.GATED_MODEL


def test_a_report_before_the_failure_changes_nothing():
    failure, category = EARLIER["gated"]
    lines = [*LATER[:1], *ENDS["compose"], LATER[0], *failure]
    assert both_paths(lines).category is category


@pytest.mark.parametrize("end", ["compose", "kubectl-logs"])
def test_a_model_found_missing_after_a_failure_to_fetch_it_is_what_that_left(end):
    """An init container's download refused, then vLLM's "Invalid repository ID or local
    directory" for the folder it was to fill: the refusal is the cause."""
    failure, category = EARLIER["gated"]
    lines = [
        *failure,
        *ENDS[end],
        "INFO 08-20 12:01:33 [api_server.py:1805] vLLM API server version 0.10.1.1",
        "ValueError: Invalid repository ID or local directory specified: '/models/x'.",
    ]
    assert both_paths(lines).category is category


def test_only_the_platforms_reports_end_a_run():
    pack = shipped_pack()
    assert all(is_run_end(line, pack) for lines in ENDS.values() for line in lines)
    for line in [
        "ERROR 06-19 09:30:14 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid "
        "70217 died, exit code: -15",  # vLLM's own worker, inside the run
        "vllm-1 exited with code 0",  # a clean stop
        "a93c1f07e2d4   vllm/vllm-openai:v0.8.5   Exited (137) 11 minutes ago   qwen",
        "$ kubectl get pods -n llm-prod",  # not a log
        "# logs of the prod pod below",  # a comment, not a root prompt
    ]:
        assert not is_run_end(line, pack)


@pytest.mark.parametrize("seed", range(40))
def test_the_backward_search_finds_the_last_reports_as_a_line_reading_does(seed, monkeypatch):
    """Blocks of a few bytes, lines longer than MAX_LINE (made small here), no final line
    end: the offsets are those of the last reports a line-by-line reading finds."""
    monkeypatch.setattr(attemptseek, "MAX_LINE", 64)
    pack = shipped_pack()
    rnd = random.Random(seed)
    pieces = [
        *ENDS["compose"],
        *ENDS["systemd"],
        "INFO 10-02 15:09:34 api_server.py:839] vLLM API server version 0.6.0",
        "x" * 100 + " vllm-1 exited with code 1",  # too long to be read as one
        "vllm-1 exited with code 1 " + "x" * 100,
        "",
    ]
    lines = [rnd.choice(pieces) for _ in range(rnd.randint(1, 30))]
    data = "\n".join(lines).encode() + (b"\n" if rnd.random() < 0.5 else b"")
    offsets, at = [], 0
    for line in data.split(b"\n"):
        if len(line) <= 64 and is_run_end(line.decode(), pack):
            offsets.append(at)
        at += len(line) + 1
    count = rnd.randint(1, 4)
    found = last_run_ends(io.BytesIO(data), 0, pack, count, chunk=rnd.randint(3, 40))
    assert found == offsets[-count:]


BF16 = (
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
    "Your Tesla T4 GPU has compute capability 7.5."
)
ARGPARSE = (
    "api_server.py: error: argument --dtype: invalid choice: 'fp16' (choose from 'auto', "
    "'half', 'float16', 'bfloat16', 'float', 'float32')"
)


@pytest.mark.parametrize(
    "prompt",
    [
        "$ python -m vllm.entrypoints.openai.api_server --model m{}",
        "(gemma) ➜  ~ vllm serve m{}",
        "root@c0ffee:/workspace# CUDA_VISIBLE_DEVICES=0 vllm serve m{}",
    ],
)
def test_a_prompt_running_vllm_again_begins_another_run(prompt):
    """The user's next try, pasted with its prompt: its argument parser fails before vLLM
    prints its version, so no start marker shows it."""
    lines = [prompt.format(""), "...", BF16, prompt.format(" --dtype fp16"), ARGPARSE]
    verdict = both_paths(lines)
    assert verdict.category is Category.BAD_CONFIG
    assert verdict.evidence is not None and verdict.evidence.line == 5


def test_a_step_before_vllms_first_run_stands_a_prompt_running_it_after():
    """A copy that filled the disk, then "$ vllm serve": what vLLM then reports (weights
    missing) is the copy's consequence."""
    lines = [
        "$ rsync -ah gpu-old:/models/nemo/ /models/nemo/",
        'rsync: [receiver] write failed on "/models/nemo/model-00004-of-00005.safetensors": '
        "No space left on device (28)",
        "$ vllm serve /models/nemo --max-model-len 32768",
        "INFO 04-25 16:31:05 [api_server.py:1034] vLLM API server version 0.8.4",
        "ValueError: Following weights were not initialized from checkpoint: "
        "{'model.layers.33.self_attn.o_proj.weight'}",
    ]
    assert both_paths(lines).category is Category.OTHER


def test_the_prompt_that_started_the_only_run_ends_nothing():
    lines = [
        "$ vllm serve m",
        "WARNING 05-21 11:03:27 _custom_ops.py:14] Failed to import from vllm._C with "
        "ImportError('/usr/lib/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')",
        "INFO 05-21 11:03:30 api_server.py:151] vLLM API server version 0.4.2",
        "NameError: name 'vllm_ops' is not defined",
    ]
    verdict = both_paths(lines)
    assert (verdict.rule, verdict.evidence and verdict.evidence.line) == ("broken-environment", 2)


def test_the_same_failure_repeated_after_a_recording_keeps_the_fuller_reading():
    """A crash loop's later log shows only the message; the earlier one showed where it
    was raised (a model's own code importing what this transformers removed)."""
    message = (
        "ImportError: cannot import name 'LlamaFlashAttention2' from "
        "'transformers.models.llama.modeling_llama'"
    )
    lines = [
        "Traceback (most recent call last):",
        '  File "/root/.cache/huggingface/modules/transformers_modules/orca/modeling_orca.py",'
        " line 38, in <module>",
        "    from transformers.models.llama.modeling_llama import (",
        f"2025-05-20T11:03:01.545677113Z {message}",
        "$ kubectl logs vllm-orca-5f7b9c6d8-w2k4n --timestamps | tail -2",
        f"2025-05-20T11:08:15.304423080Z {message}",
    ]
    verdict = both_paths(lines)
    assert verdict.category is Category.REMOTE_CODE
    assert verdict.evidence is not None and verdict.evidence.line == 4


LOADING_RUN = [
    "INFO 10-02 17:40:44 [api_server.py:1839] vLLM API server version 0.11.0",
    "INFO 10-02 17:41:02 [gpu_model_runner.py:2602] Starting to load model m...",
    "Loading safetensors checkpoint shards:  50% Completed | 3/6 [00:02<00:02,  1.09it/s]",
]


@pytest.mark.parametrize(
    "prompt",
    [
        "$ {}",
        "[ml@a100-80 ~]$ {}",
        "(venv) [u@h proj]$ {}",
        "dev@ws-3090 ~/s/vllm-test (main)> {}",
        "PS C:\\src> {}",
    ],
)
@pytest.mark.parametrize("last", ["under-way", "killed"])
def test_a_prompt_running_vllm_with_another_command_answered_the_failure(prompt, last):
    """The user ran vLLM again with another command (a flag fixed, one added): the run
    after it, cut short while loading or ended by a consequence, is the verdict by its
    own state; run with the same command (a retry), the earlier failure stands, as a
    crash loop's does."""
    typo = "vllm serve m --max-model-length 16384"
    fixed = "vllm serve m --max-model-len 16384"
    end = ["Killed"] if last == "killed" else []
    failed = [
        prompt.format(typo),
        "vllm serve: error: unrecognized arguments: --max-model-length 16384",
    ]
    verdict = both_paths([*failed, prompt.format(fixed), *LOADING_RUN, *end])
    if last == "killed":
        assert (verdict.rule, verdict.evidence and verdict.evidence.line) == ("process-killed", 7)
    else:
        assert not verdict.failed
    again = both_paths([*failed, prompt.format(typo), *LOADING_RUN, *end])
    assert again.category is Category.BAD_CONFIG
