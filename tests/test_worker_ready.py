"""The worker on real vLLM (CPU build) through the real RunPod SDK job loop.

One worker start is shared by the module (a vLLM start costs ~40 s here). A job is
queued before the worker even starts, to show no job is taken before ready.
"""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import (
    build_tiny_model,
    events,
    group_alive,
    needs_vllm,
    start_worker,
    worker_env,
)

pytestmark = [needs_vllm, pytest.mark.vllm]
SERVED = "tiny"
CHAT = [{"role": "user", "content": "Say hello"}]


@pytest.fixture(scope="module")
def ready_worker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ready")
    model = build_tiny_model(tmp / "model")
    with QueueServer() as queue:
        early = queue.submit({"openai_route": "/v1/models"})
        env = worker_env(
            tmp, MODEL_NAME=str(model), OPENAI_SERVED_MODEL_NAME_OVERRIDE=SERVED, **queue.env()
        )
        proc = start_worker(env, tmp)
        try:
            queue.wait_done(early, timeout=300)
            yield {"queue": queue, "proc": proc, "tmp": tmp, "early": early}
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)


def _output(queue, job_input, timeout=120):
    job = queue.submit(job_input)
    return queue.wait_done(job, timeout)


def _error(done) -> dict:
    assert isinstance(done.get("error"), str), done
    return json.loads(done["error"])


def test_no_job_is_taken_before_ready(ready_worker):
    queue, tmp = ready_worker["queue"], ready_worker["tmp"]
    ready = [
        e
        for e in events(tmp)
        if e.get("event") == "worker.state_changed" and e.get("dest") == "ready"
    ]
    assert len(ready) == 1
    ready_at = datetime.fromisoformat(ready[0]["timestamp"]).timestamp()
    taken_wall = queue.job(ready_worker["early"]).taken_wall
    assert taken_wall >= ready_at
    assert queue.results[ready_worker["early"]]["output"][0]["data"][0]["id"] == SERVED


def test_cold_start_summary_is_logged(ready_worker):
    summary = [e for e in events(ready_worker["tmp"]) if e.get("event") == "vllm.cold_start"]
    assert len(summary) == 1
    assert {"download_s", "load_s", "compile_capture_s", "total_s"} <= set(summary[0])


def test_chat_completion_openai_route(ready_worker):
    done = _output(
        ready_worker["queue"],
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": CHAT, "max_tokens": 5},
        },
    )
    (answer,) = done["output"]
    assert answer["object"] == "chat.completion" and answer["model"] == SERVED


def test_completion_standard_prompt(ready_worker):
    done = _output(
        ready_worker["queue"],
        {"prompt": "Hello", "sampling_params": {"max_tokens": 4, "temperature": 0}},
    )
    (answer,) = done["output"]
    assert answer["object"] == "text_completion"
    assert answer["usage"]["completion_tokens"] == 4


def test_messages_standard_shape(ready_worker):
    done = _output(ready_worker["queue"], {"messages": CHAT, "sampling_params": {"max_tokens": 3}})
    assert done["output"][0]["object"] == "chat.completion"


def test_responses_route(ready_worker):
    done = _output(
        ready_worker["queue"],
        {"openai_route": "/v1/responses", "openai_input": {"input": "Hi", "max_output_tokens": 5}},
    )
    assert done["output"][0]["object"] == "response"


def test_anthropic_messages_route(ready_worker):
    done = _output(
        ready_worker["queue"],
        {"openai_route": "/v1/messages", "openai_input": {"messages": CHAT, "max_tokens": 5}},
    )
    assert done["output"][0]["type"] == "message"


def test_streaming_chat_yields_sse_chunks_ending_with_done(ready_worker):
    queue = ready_worker["queue"]
    job = queue.submit(
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": CHAT, "max_tokens": 6, "stream": True},
        }
    )
    done = queue.wait_done(job, 120)
    chunks = done["output"]
    assert len(chunks) > 1
    assert all(isinstance(c, str) and c.startswith("data: ") for c in chunks)
    assert chunks[-1].strip() == "data: [DONE]"
    assert len(queue.job(job).stream) == len(chunks)  # each chunk was streamed as it came


def test_bad_input_gets_a_parseable_error(ready_worker):
    error = _error(_output(ready_worker["queue"], {"messages": "not a list"}))
    assert error["type"] == "invalid_request_error"
    assert "messages" in error["message"]


def test_vllm_4xx_passes_through(ready_worker):
    error = _error(
        _output(
            ready_worker["queue"],
            {
                "openai_route": "/v1/chat/completions",
                "openai_input": {"messages": CHAT, "max_tokens": 100000},
            },
        )
    )
    assert error["code"] == 400
    assert "max" in error["message"].lower()


def test_thirty_concurrent_jobs(ready_worker):
    queue = ready_worker["queue"]
    jobs = [
        queue.submit({"prompt": f"n{i}", "sampling_params": {"max_tokens": 3}}) for i in range(30)
    ]
    with ThreadPoolExecutor(30) as pool:
        results = list(pool.map(lambda j: queue.wait_done(j, 300), jobs))
    assert all(r["output"][0]["object"] == "text_completion" for r in results)


def test_vllm_killed_mid_stream_ends_jobs_with_errors_and_worker_exits_nonzero(ready_worker):
    # Last test of the module: it ends the shared worker.
    queue, tmp, proc = ready_worker["queue"], ready_worker["tmp"], ready_worker["proc"]
    spawned = next(e for e in events(tmp) if e.get("event") == "vllm.spawned")
    job = queue.submit(
        {
            "openai_route": "/v1/completions",
            "openai_input": {
                "prompt": "long",
                "max_tokens": 400,
                "stream": True,
                "ignore_eos": True,
            },
        }
    )
    queue.wait_for(lambda: len(queue.job(job).stream) >= 2, 120, "first streamed chunks")
    os.killpg(spawned["pid"], signal.SIGKILL)
    done = queue.wait_done(job, 60)
    assert json.loads(done["error"])["type"] == "upstream_error"
    assert proc.wait(60) != 0
    assert not group_alive(spawned["pid"])
