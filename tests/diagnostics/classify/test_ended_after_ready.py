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
