"""The worker on real vLLM (CPU build) through the real RunPod SDK job loop.

One worker start is shared by the module (a vLLM start costs ~40 s here). A job is
queued before the worker even starts, to show no job is taken before ready.
"""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.openai_gateway import OpenAIGateway
from tests.support.queue_server import QueueServer
from tests.support.sse import check_sse_chunks
from tests.support.vllm_env import (
    ROOT,
    events,
    group_alive,
    needs_vllm,
    start_worker,
    tiny_model_env,
)

pytestmark = [needs_vllm, pytest.mark.vllm]
SERVED = "tiny"
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_SAMPLING = st.fixed_dictionaries(
    {"max_tokens": st.integers(1, 2)}, optional={"temperature": st.floats(0, 2)}
)
JOB_INPUTS = st.one_of(
    _JSON,
    st.fixed_dictionaries(
        {"prompt": st.text(max_size=20) | _JSON},
        optional={"sampling_params": _SAMPLING | _JSON, "stream": st.booleans() | _JSON},
    ),
    st.fixed_dictionaries(
        {
            "messages": st.lists(
                st.fixed_dictionaries(
                    {
                        "role": st.sampled_from(["user", "system", "x"]),
                        "content": st.text(max_size=10),
                    }
                ),
                max_size=2,
            )
            | _JSON
        },
        optional={"sampling_params": _SAMPLING},
    ),
    st.fixed_dictionaries(
        {
            "openai_route": st.sampled_from(
                [
                    "/v1/models",
                    "/v1/completions",
                    "/v1/nope",
                    "/../etc",
                    "v1/models",
                    "/v1/chat/completions",
                ]
            )
            | st.text(max_size=12)
        },
        optional={
            "openai_input": st.fixed_dictionaries(
                {},
                optional={
                    "prompt": st.text(max_size=5),
                    "max_tokens": st.integers(-1, 2),
                    "messages": _JSON,
                },
            )
            | _JSON
        },
    ),
    st.fixed_dictionaries(
        {
            "route": st.text(max_size=12) | st.just("/v1/models"),
            "method": st.sampled_from(["GET", "POST", "PUT", "get"]) | _JSON,
        },
        optional={"body": _JSON},
    ),
)
CHAT = [{"role": "user", "content": "Say hello"}]


@pytest.fixture(scope="module")
def ready_worker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ready")
    with QueueServer() as queue:
        early = queue.submit({"openai_route": "/v1/models"})
        env = tiny_model_env(tmp, OPENAI_SERVED_MODEL_NAME_OVERRIDE=SERVED, **queue.env())
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
    check_sse_chunks(chunks)
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


def test_queue_faults_lose_nothing_deliverable(ready_worker, reliability):
    queue = ready_worker["queue"]
    queue.fail_next(2, status=500, kinds=("job-done",))
    first = _output(queue, {"prompt": "a", "sampling_params": {"max_tokens": 2}})
    assert first["output"][0]["object"] == "text_completion"  # delivered on the SDK's retry
    queue.drop_connections(1, kinds=("job-take",))
    second = _output(queue, {"prompt": "b", "sampling_params": {"max_tokens": 2}})
    assert second["output"][0]["object"] == "text_completion"  # the worker kept serving
    reliability(
        "job queue answers 500 twice to job-done; drops a job-take connection",
        "ready",
        "result delivered on retry; worker keeps taking jobs",
    )


@settings(
    max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
@given(job_input=JOB_INPUTS)
def test_generated_inputs_get_an_answer_or_a_structured_error(ready_worker, job_input):
    done = _output(ready_worker["queue"], job_input, timeout=120)
    if "error" in done:
        error = json.loads(done["error"])
        assert {"message", "type", "code"} <= set(error)
    else:
        assert isinstance(done["output"], list) and done["output"]
    assert ready_worker["proc"].poll() is None


def test_hypothesis_inputs_recorded(ready_worker, reliability):
    assert ready_worker["proc"].poll() is None
    reliability(
        "250 generated job inputs (hypothesis: any JSON, near-valid shapes)",
        "ready",
        "each got a structured error or a valid answer; worker never crashed",
        requires=("test_generated_inputs_get_an_answer_or_a_structured_error",),
    )


def test_readme_client_examples_run_through_the_gateway(ready_worker, capsys):
    """The README's OpenAI and Anthropic client block, as written, against this worker
    through a stand-in for RunPod's OpenAI-compatible gateway."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Calling it", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    with OpenAIGateway(ready_worker["queue"]) as gateway:
        code = (
            block.replace("https://api.runpod.ai/v2/<endpoint>", f"{gateway.url}/v2/ep")
            .replace("<RUNPOD_API_KEY>", "test-key")
            .replace("<MODEL_NAME>", SERVED)
        )
        exec(compile(code, "README.md", "exec"), {})  # raises on any error answer
        routes = [gateway.queue.job(j).input["openai_route"] for j in gateway.jobs]
    assert routes == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/responses",
        "/v1/messages",
    ]
    assert capsys.readouterr().out.strip()  # the answer and the stream were printed


def test_sigterm_with_jobs_in_flight_ends_this_worker(ready_worker, reliability):
    """The last test of this file: SIGTERM with five streaming jobs in flight ends the
    shared worker (the module fixture then finds it stopped)."""
    queue, proc, tmp = ready_worker["queue"], ready_worker["proc"], ready_worker["tmp"]
    jobs = [
        queue.submit(
            {
                "prompt": "x",
                "sampling_params": {"max_tokens": 200, "ignore_eos": True},
                "stream": True,
            }
        )
        for _ in range(5)
    ]
    for job in jobs:
        queue.wait_taken(job, 60)
    spawned = next(e for e in events(tmp) if e.get("event") == "vllm.spawned")
    os.killpg(proc.pid, signal.SIGTERM)
    started = time.monotonic()
    code = proc.wait(60)
    ended = {j: queue.results.get(j) for j in jobs}
    assert code == 0
    assert all(r is not None for r in ended.values()), "a job in flight was left without an answer"
    assert not group_alive(spawned["pid"])
    reliability(
        "SIGTERM with 5 streaming jobs in flight",
        "stopped",
        f"every job finished or got an error; vLLM group gone; worker exit 0 after {time.monotonic() - started:.1f} s",
    )
