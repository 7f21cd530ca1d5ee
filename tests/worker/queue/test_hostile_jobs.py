"""Job inputs the RunPod SDK cannot read: nested about 1,000 levels deep, runpod 1.12's
job-take raises RecursionError and the whole batch was lost unanswered. The worker's
own job-take (worker.queue.job_fetch; the body read by worker.queue.take_body) reads
such a batch and answers every job."""

from __future__ import annotations

import json
import os
import signal
import sys

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import ROOT, replay_env, start_worker
from worker.queue.job_check import INPUT_ERROR
from worker.queue.job_fetch import parse_jobs
from worker.queue.take_body import MAX_DEPTH, flatten

PERMANENT = ROOT / "fixtures" / "vllm-0.32" / "max-model-len-too-large.log"


def _deep(levels: int) -> str:
    return '{"a": ' * levels + '"leaf"' + "}" * levels


def test_a_batch_with_a_deep_input_is_read_whole():
    deep = '{"id": "deep", "input": {"messages": ' + _deep(5000) + "}}"
    body = f'[{{"id": "plain", "input": {{"prompt": "[{{\\"x"}}}}, {deep}, {{"input": 1, "id": "last"}}]'
    jobs = parse_jobs(body.encode())
    assert [job["id"] for job in jobs] == ["plain", "deep", "last"]
    assert jobs[0]["input"] == {"prompt": '[{"x'} and INPUT_ERROR not in jobs[0]
    assert "nested deeper than" in jobs[1][INPUT_ERROR]
    assert jobs[2]["input"] == 1 and "must be a JSON object" in jobs[2][INPUT_ERROR]


def test_a_single_deep_job_and_unreadable_bodies():
    job = parse_jobs(('{"input": ' + _deep(3000) + ', "id": "j"}').encode())
    assert job[0]["id"] == "j" and INPUT_ERROR in job[0]
    assert parse_jobs(b"[" * 5000) == []  # not JSON: dropped, as the SDK drops it
    assert parse_jobs(b"\xff\xfe") == []


def test_flatten_keeps_what_is_not_too_deep():
    text = json.dumps({"a": [1, {"b": ']}\\"['}], "c": _deep(3)})
    assert flatten(text, MAX_DEPTH) == (text, set())
    flat, damaged = flatten('[{"x": [[[1]]]}, {"y": 2}]', 3)
    assert json.loads(flat) == [{"x": ["<nested deeper than 500 levels>"]}, {"y": 2}]
    assert damaged == {0}


def test_the_worker_answers_a_job_nested_too_deep_for_the_sdk(tmp_path, reliability):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # the queue server (this process) must encode it
    try:
        with QueueServer() as queue:
            env = replay_env(
                tmp_path,
                PERMANENT,
                **queue.env(),
            )
            deep = queue.submit({"messages": json.loads(_deep(3000))})
            plain = queue.submit({"prompt": "x"})
            proc = start_worker(env, tmp_path)
            try:
                deep_answer = json.loads(queue.wait_done(deep, 60)["error"])
                plain_answer = json.loads(queue.wait_done(plain, 60)["error"])
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                assert proc.wait(60) == 0
    finally:
        sys.setrecursionlimit(limit)
    assert deep_answer["type"] == "invalid_request_error"
    assert "nested deeper than" in deep_answer["message"]
    assert plain_answer["type"] == "startup_error"
    reliability(
        "a job input nested 3,000 levels deep (runpod 1.12's job-take raises RecursionError "
        "and loses the batch)",
        "failed-permanent (stand-in)",
        "the deep job answered with invalid_request_error naming the nesting; the other job "
        "answered normally; worker exit 0 on SIGTERM",
    )
