"""The supervisor against real vLLM (CPU build), for what only vLLM shows: two failed
starts as vLLM prints them today (every recorded failure in fixtures/vllm-0.32 is
replayed through the supervisor in tests/worker/supervision/test_supervisor.py, in seconds), and a
hub download that goes downloading → loading → ready."""

from __future__ import annotations

import io

import pytest

from tests.support.hub_server import HubServer
from tests.support.packs import shipped_pack
from tests.support.vllm_env import build_tiny_model, needs_vllm, worker_env
from worker.config.settings import load_settings
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

pytestmark = [needs_vllm, pytest.mark.vllm]
PACK = shipped_pack()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {"ok": build_tiny_model(root / "ok", "ok")}


def _run(env) -> Supervisor:
    supervisor = Supervisor(load_settings(env), PACK, env, passthrough=io.BytesIO())
    seen: list[WorkerState] = []
    supervisor.effects.observers.append(seen.append)
    supervisor.run_in_thread()
    assert supervisor.settled.wait(240)
    supervisor.request_stop()
    assert supervisor.wait_stopped(60)
    supervisor.seen = seen
    return supervisor


CASES = [
    ("unknown-flag", {"VLLM_EXTRA_ARGS": "--frobnicate 3"}, "unrecognized-flag"),
    ("max-model-len", {"MAX_MODEL_LEN": "8192"}, "max-model-len-above-model-limit"),
]


@pytest.mark.parametrize(("name", "extra", "rule"), CASES, ids=[c[0] for c in CASES])
def test_failure_is_diagnosed(tmp_path, models, name, extra, rule):
    env = worker_env(tmp_path, MODEL_NAME=str(models["ok"]), **extra)
    supervisor = _run(env)
    assert supervisor.state is WorkerState.FAILED_PERMANENT
    assert (str(supervisor.diagnosis.category), supervisor.diagnosis.rule) == ("bad_config", rule)


def test_download_then_load_then_ready(tmp_path, models):
    with HubServer({"tiny-org/tiny-llama": models["ok"]}, throttle_bps=400_000) as hub:
        env = worker_env(tmp_path, MODEL_NAME="tiny-org/tiny-llama", HF_ENDPOINT=hub.url)
        del env["HF_HUB_OFFLINE"]
        supervisor = _run(env)
    assert WorkerState.READY in supervisor.seen
    assert WorkerState.LOADING in supervisor.seen
    assert supervisor.seen[-1] is WorkerState.STOPPED
