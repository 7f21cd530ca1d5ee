"""A bare error after ready is a failed request the server outlives, unless vLLM's end
follows it (a consequence or a shape read after ready: the shell's ``Killed``, a fatal
signal's shutdown): then that error is what ended it (``Findings.named_by_late``), judged
where it was raised like any other."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths

SITE = "/usr/local/lib/python3.12/dist-packages"
READY = [
    "INFO 04-25 14:08:40 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000",
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
]
ASSERTION = [
    "ERROR 04-25 14:09:31 [core.py:387] EngineCore hit an exception: Traceback (most recent "
    "call last):",
    f'ERROR 04-25 14:09:31 [core.py:387]   File "{SITE}/vllm/v1/core/sched/scheduler.py", '
    "line 183, in schedule",
    "ERROR 04-25 14:09:31 [core.py:387]     assert num_new_tokens > 0",
    "ERROR 04-25 14:09:31 [core.py:387] AssertionError",
]
FATAL = [
    "CRITICAL 04-25 14:09:31 [core_client.py:361] Got fatal signal from worker processes, "
    "shutting down. See stack trace above for root cause issue.",
    "Killed",
]


def test_an_error_after_ready_that_ended_vllm_names_the_end():
    diagnosis = both_paths([*READY, *ASSERTION, *FATAL])
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "assert num_new_tokens > 0" in (diagnosis.cause or "")
    assert "while serving" in (diagnosis.cause or "")


def test_an_error_after_ready_that_vllm_outlived_is_a_failed_request():
    diagnosis = both_paths([*READY, *ASSERTION, 'INFO:     10.0.0.7:5532 - "GET /health" 200 OK'])
    assert diagnosis.state is State.READY


@pytest.mark.parametrize("end", [["Killed"], FATAL])
def test_an_end_after_ready_with_no_error_before_it_stays_the_end(end):
    diagnosis = both_paths([*READY, *end])
    assert diagnosis.state is State.FAILED_TRANSIENT


def test_an_end_before_the_error_does_not_hand_the_verdict_to_it():
    """The end came first: the error after it is not what ended vLLM."""
    diagnosis = both_paths([*READY, "Killed", *ASSERTION])
    assert "assert num_new_tokens" not in (diagnosis.cause or "")


# A warning vLLM or another program logged after ready, whose words a rule reads (lm-eval's
# after an offline run: held-out AHV, stop 62), is no end of vLLM either.
OFFLINE_UP = [
    "INFO 10-11 14:03:08 model_runner.py:1456] Graph capturing finished in 10 secs.",
    "Processed prompts: 100%|██████████| 1319/1319 [00:41<00:00, 31.62it/s]",
]
WARNINGS = {
    "lm-eval": "2024-10-11:14:04:05,870 WARNING  [huggingface.py:1335] Failed to get model "
    "SHA for meta-llama/Llama-3.2-3B-Instruct at revision main. Error: Repo id must use "
    "alphanumeric chars or '-', '_', '.', '--' and '..' are forbidden, '-' and '.' cannot "
    "start or end the name, max length is 96: 'meta-llama/Llama-3.2-3B-Instruct '.",
    "python": "WARNING:lm_eval.models.huggingface:Failed to get model SHA. Error: Repo id "
    "must be in the form 'repo_name' or 'namespace/repo_name': '/data/models/llama'.",
    "vllm": "WARNING 10-11 14:04:05 config.py:413] Error retrieving file list: Repo id must "
    "be in the form 'repo_name' or 'namespace/repo_name': '/data/models/llama'.",
}


@pytest.mark.parametrize("logger", list(WARNINGS), ids=list(WARNINGS))
@pytest.mark.parametrize("up", [OFFLINE_UP, READY], ids=["offline", "server"])
def test_a_warning_after_ready_is_no_failure(logger, up):
    assert both_paths([*up, WARNINGS[logger]]).state is State.READY


def test_the_same_words_logged_as_an_error_after_ready_still_count():
    line = WARNINGS["vllm"].replace("WARNING", "ERROR", 1)
    assert both_paths([*READY, line]).state is not State.READY


def test_a_bare_error_after_a_warning_after_ready_names_vllms_end():
    diagnosis = both_paths([*READY, WARNINGS["lm-eval"], *ASSERTION, *FATAL])
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "assert num_new_tokens > 0" in (diagnosis.cause or "")
