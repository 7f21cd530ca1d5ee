"""worker.queue.handler: each job answered by the supervisor's state. Real supervisors: one
that failed its configuration (no process), and ones following the scripted stand-in
for vLLM (tests/support/scripted_vllm.py)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from diagnostics import State
from tests.support.packs import shipped_pack
from tests.support.scripted_vllm import standin_env
from worker.config.settings import fallback_settings, load_settings
from worker.queue.handler import make_handler
from worker.queue.proxy import VllmProxy
from worker.supervision.failure import config_failure
from worker.supervision.supervisor import Supervisor, Timing

PACK = shipped_pack()
JOB = {"id": "j1", "input": {"openai_route": "/v1/models"}}


def _answers(handler: Any, job: dict) -> list[Any]:
    async def collect() -> list[Any]:
        stream: AsyncIterator[Any] = handler(job)
        return [item async for item in stream]

    return asyncio.run(collect())


def _error(item: Any) -> dict:
    assert isinstance(item, dict) and isinstance(item["error"], str)
    return json.loads(item["error"])


def _scripted(tmp_path: Path, *script: str) -> Supervisor:
    env = standin_env(tmp_path, *script)
    timing = Timing(sample_every_s=0.05, linger_after_fatal_s=0.3)
    supervisor = Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO(), timing=timing)
    supervisor.run_in_thread()
    assert supervisor.settled.wait(30)
    return supervisor


def _no_proxy() -> VllmProxy:
    raise AssertionError("a worker that is not ready must not proxy")


def test_failed_permanent_answers_every_job_with_the_cause(tmp_path) -> None:
    env = {"MAX_CONCURRENCY": "lots", "BASE_PATH": str(tmp_path)}
    failure = config_failure("MAX_CONCURRENCY", "expected an integer, got 'lots'")
    supervisor = Supervisor(fallback_settings(env), PACK, env, config_failure=failure)
    supervisor.start()
    handler = make_handler(supervisor, _no_proxy, "m")
    for _ in range(2):
        (item,) = _answers(handler, JOB)
        error = _error(item)
        assert error["type"] == "startup_error"
        assert (error["category"], error["rule"]) == ("bad_config", "invalid-setting")
        assert "MAX_CONCURRENCY" in error["message"]


def test_failed_transient_answers_with_the_end_of_vllms_output(tmp_path) -> None:
    line = "RuntimeError: Engine core initialization failed. See root cause above."
    supervisor = _scripted(tmp_path, "--say", "INFO starting", "--say", line, "exit:1")
    assert supervisor.wait_stopped(30) and supervisor.state is State.FAILED_TRANSIENT
    (item,) = _answers(make_handler(supervisor, _no_proxy, "m"), JOB)
    error = _error(item)
    assert error["type"] == "prestart_failed"
    assert error["tail"][-1] == line


def test_ready_proxies_to_vllm_and_makes_the_proxy_once(tmp_path) -> None:
    supervisor = _scripted(tmp_path, "serve")
    assert supervisor.state is State.READY
    made: list[VllmProxy] = []

    def factory() -> VllmProxy:
        made.append(VllmProxy(supervisor.settings.vllm_port, request_timeout=10, max_concurrency=2))
        return made[-1]

    handler = make_handler(supervisor, factory, "stand-in/model")
    second = {"id": "j2", "input": {"route": "/v1/models"}}

    async def two_jobs() -> list[list[Any]]:  # on one loop, as the SDK runs them
        answers = [[item async for item in handler(job)] for job in (JOB, second)]
        await made[0].aclose()
        return answers

    try:
        assert asyncio.run(two_jobs()) == [[{"path": "/v1/models"}], [{"path": "/v1/models"}]]
        assert len(made) == 1
    finally:
        supervisor.request_stop()
        assert supervisor.wait_stopped(30)


def test_ready_answers_bad_input_without_proxying(tmp_path) -> None:
    supervisor = _scripted(tmp_path, "serve")
    try:
        handler = make_handler(supervisor, _no_proxy, "m")
        (item,) = _answers(handler, {"id": "j3", "input": ["not", "an", "object"]})
        error = _error(item)
        assert (error["type"], error["code"]) == ("invalid_request_error", 400)
        assert "must be a JSON object" in error["message"]
    finally:
        supervisor.request_stop()
        assert supervisor.wait_stopped(30)
