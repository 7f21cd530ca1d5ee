"""A server at work whose ready marker the log did not keep (a tail pasted from a running
server) reads as ready, through both paths (diagnostics.classify.serving); a start under
way after it, a failure, or another service's answers do not."""

from __future__ import annotations

import pytest

from diagnostics.classify.serving import TAIL_BYTES, serving
from diagnostics.model import State
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()

# What vLLM prints only while it serves, in the formats of its versions.
SERVING = {
    "v0-stats": "INFO 03-11 18:41:30 metrics.py:351] Avg prompt throughput: 412.6 tokens/s, "
    "Avg generation throughput: 38.2 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 0 "
    "reqs, GPU KV cache usage: 97.8%, CPU KV cache usage: 0.0%.",
    "v1-stats": "(APIServer pid=1) INFO 10-17 06:20:01 [loggers.py:123] Engine 000: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%",
    "access-200": 'INFO:     10.244.1.7:51318 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "access-health": '(APIServer pid=1) INFO:     10.0.3.17:51234 - "GET /health HTTP/1.1" 200 OK',
    "access-400": 'INFO:     127.0.0.1:40112 - "POST /v1/completions HTTP/1.1" 400 Bad Request',
    "request-log": "INFO 05-02 11:03:12 async_llm_engine.py:208] Added request "
    "chatcmpl-5b1c9e0f3d2a4e7b.",
}
NOISE = [
    "WARNING 03-11 18:41:27 scheduler.py:1560] Sequence group 0 is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
    "",
]
LOADING = "INFO 05-02 11:01:02 model_runner.py:1008] Starting to load model /models/llama-3-8b..."
RESTART = "INFO 05-02 11:05:00 api_server.py:177] vLLM API server version 0.5.4"
FAILURE = [
    "Traceback (most recent call last):",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 1.02 GiB is free.",
]


@pytest.mark.parametrize("line", SERVING.values(), ids=SERVING.keys())
@pytest.mark.parametrize("before", [[], [LOADING]], ids=["tail", "after-loading"])
def test_a_server_at_work_is_ready(line, before):
    assert both_paths([*before, *NOISE, line, *NOISE]).state is State.READY


@pytest.mark.parametrize("line", SERVING.values(), ids=SERVING.keys())
def test_a_start_after_it_is_under_way(line):
    """A restart after the server served: the new start's phase, as the line scan read it."""
    assert both_paths([line, RESTART, LOADING]).state is State.LOADING
    assert both_paths([line, RESTART]).state is State.STARTING


@pytest.mark.parametrize("line", SERVING.values(), ids=SERVING.keys())
def test_a_failure_is_not_hidden(line):
    assert both_paths([LOADING, *FAILURE, line]).state is State.FAILED_PERMANENT


@pytest.mark.parametrize(
    "line",
    [
        'INFO:     10.0.0.3:5000 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
        'INFO:     10.0.0.3:5000 - "GET /api/config HTTP/1.1" 200 OK',  # not vLLM's route
        "Avg prompt throughput was discussed above",
    ],
)
def test_what_is_not_a_server_at_work(line):
    assert both_paths([LOADING, line]).state is State.LOADING


def test_another_services_answers_do_not_count():
    vllm, ui = "vllm-1        | ", "open-webui-1  | "
    lines = [
        f"{vllm}INFO 10-17 06:12:44 [api_server.py:1839] vLLM API server version 0.11.0",
        f"{vllm}(APIServer pid=1) INFO 10-17 06:12:58 [gpu_model_runner.py:2602] Starting to "
        "load model Qwen/Qwen3-8B...",
        f'{ui}INFO:     172.18.0.1:40000 - "GET /health HTTP/1.1" 200 OK',
    ]
    assert both_paths(lines).state is State.LOADING
    assert both_paths([*lines, f"{vllm}{SERVING['access-200']}"]).state is State.READY


def test_only_the_tail_is_read():
    """The lines are read from the last TAIL_BYTES of the log: serving lines further up,
    under a long tail of lines that show neither, do not count."""
    filler = ["WARNING 05-02 11:03:00 tokenizer.py:1] a warning repeated " + "x" * 60] * (
        TAIL_BYTES // 100 + 10
    )
    assert both_paths([LOADING, SERVING["v0-stats"], *filler]).state is State.LOADING
    assert both_paths([LOADING, *filler, SERVING["v0-stats"]]).state is State.READY


def test_the_line_scan_never_reads_them():
    """Serving lines are not in the line database: hours of request logs after a ready
    marker stay lines no pattern matches, which the fast path skips unread."""
    assert PACK.serving
    assert not any(
        p.kind == "phase" and PACK.phases[p.owner].phase == "serving" for p in PACK.patterns
    )
    assert serving([SERVING["v0-stats"]], PACK)
    assert not serving([], PACK)


# A request's error as a server at work logs it: no cause of its own is named (a message
# no rule knows, an exception family, a bare exception, judged where it was raised).
REQUEST_ERRORS = {
    "error-line": [
        "ERROR 05-14 09:12:58 [serving_chat.py:137] Error with model object='error' "
        "message='The model `gpt-4o-mini` does not exist.' type='NotFoundError' code=404",
    ],
    "client-gone": [
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/starlette/responses.py", line 260, '
        "in wrap",
        "    await func()",
        '  File "/usr/lib/python3.10/asyncio/locks.py", line 214, in wait',
        "    await fut",
        "asyncio.exceptions.CancelledError: Cancelled by cancel scope 7f51a4c8e2b0",
    ],
    "raised-in-a-handler": [
        "ERROR 04-02 10:11:12 serving_chat.py:222] Error in preprocessing prompt inputs",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/'
        'serving_chat.py", line 205, in create_chat_completion',
        "    request_prompts, engine_prompts = await self._preprocess_chat(",
        "ValueError: Unknown part type 'input_audio_url' in the request's messages",
    ],
}


@pytest.mark.parametrize("error", REQUEST_ERRORS.values(), ids=REQUEST_ERRORS.keys())
@pytest.mark.parametrize("line", SERVING.values(), ids=SERVING.keys())
def test_a_requests_error_that_the_server_served_on_after_is_no_failed_start(line, error):
    """A log that begins while the server serves (no ready marker) and holds a request's
    error: failed line by line, up once vLLM's serving lines follow the error, or, for
    an error a request handler logged (its header names serving_chat.py), once they come
    before it (held-out WS, stop 54: BentoML's service, a prompt over the context length
    refused, the paste's last line)."""
    handler = "serving_chat.py" in error[0]
    last = both_paths([line, *error])  # the error is the last thing it shows
    assert (last.state is State.READY) if handler else last.failed
    assert both_paths([*error]).failed  # nothing served: a failure of its own
    assert both_paths([line, *error, *NOISE, line]).state is State.READY
    assert both_paths([*error, line]).state is State.READY
    assert both_paths([*error, SERVING["access-400"]]).state is State.READY  # answered


@pytest.mark.parametrize(
    "cause",
    [
        FAILURE,  # a named cause
        ["RuntimeError: Engine core initialization failed. See root cause above."],  # consequence
    ],
    ids=["cause", "consequence"],
)
def test_a_named_cause_or_an_engines_end_followed_by_serving_lines_stays_a_failure(cause):
    assert both_paths([SERVING["v1-stats"], *cause, SERVING["access-200"]]).failed


def test_an_error_above_the_lines_read_is_not_known_to_be_followed():
    """The tail is the last TAIL_BYTES: an error further up stays a failure, whatever
    serving lines the tail holds (the lines between are not read)."""
    filler = [SERVING["access-health"]] * (TAIL_BYTES // 60 + 10)
    assert both_paths([*REQUEST_ERRORS["client-gone"], *filler]).failed
