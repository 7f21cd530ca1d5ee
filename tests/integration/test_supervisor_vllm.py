"""The supervisor against real vLLM (CPU build): each failure reproducible here ends in
the right state and category; a hub download goes downloading → loading → ready."""

from __future__ import annotations

import io

import pytest

from diagnostics import load_pack
from tests.support.hub_server import HubServer
from tests.support.vllm_env import build_tiny_model, needs_vllm, worker_env
from worker.machine import WorkerState
from worker.settings import load_settings
from worker.supervisor import Supervisor

pytestmark = [needs_vllm, pytest.mark.vllm]
PACK = load_pack()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {v: build_tiny_model(root / v, v) for v in ("ok", "unsupported-arch", "custom-code")}


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
    (
        "unknown-flag",
        "ok",
        {"VLLM_EXTRA_ARGS": "--frobnicate 3"},
        "bad_config",
        "unrecognized-flag",
    ),
    (
        "max-model-len",
        "ok",
        {"MAX_MODEL_LEN": "8192"},
        "bad_config",
        "max-model-len-above-model-limit",
    ),
    ("unsupported-arch", "unsupported-arch", {}, "model_requirement", "architecture-not-supported"),
    ("custom-code", "custom-code", {}, "remote_code", "remote-code-required"),
    (
        "kv-cache-too-small",
        "ok",
        {"MAX_MODEL_LEN": "2048", "KV_CACHE_MEMORY_BYTES": "4096"},
        "kv_cache",
        "kv-cache-no-memory",
    ),
]


@pytest.mark.parametrize(
    ("name", "variant", "extra", "category", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_failure_is_diagnosed(tmp_path, models, name, variant, extra, category, rule):
    env = worker_env(tmp_path, MODEL_NAME=str(models[variant]), **extra)
    supervisor = _run(env)
    assert supervisor.state is WorkerState.FAILED_PERMANENT
    assert (str(supervisor.diagnosis.category), supervisor.diagnosis.rule) == (category, rule)


def test_hub_unreachable_is_transient_network(tmp_path):
    env = worker_env(tmp_path, MODEL_NAME="tiny-org/tiny-llama", HF_ENDPOINT="http://127.0.0.1:9")
    del env["HF_HUB_OFFLINE"]
    supervisor = _run(env)
    assert supervisor.state is WorkerState.FAILED_TRANSIENT
    assert str(supervisor.diagnosis.category) == "network"


@pytest.mark.parametrize(
    ("repo", "category"),
    [("tiny-org/gated-llama", "gated_model"), ("tiny-org/missing", "model_not_found")],
)
def test_hub_refusals(tmp_path, models, repo, category):
    with HubServer({"tiny-org/gated-llama": models["ok"]}, gated={"tiny-org/gated-llama"}) as hub:
        env = worker_env(tmp_path, MODEL_NAME=repo, HF_ENDPOINT=hub.url)
        del env["HF_HUB_OFFLINE"]
        supervisor = _run(env)
    assert supervisor.state is WorkerState.FAILED_PERMANENT
    assert str(supervisor.diagnosis.category) == category
    if category == "gated_model":
        assert "HF_TOKEN" in supervisor.diagnosis.message


def test_download_then_load_then_ready(tmp_path, models):
    with HubServer({"tiny-org/tiny-llama": models["ok"]}, throttle_bps=400_000) as hub:
        env = worker_env(tmp_path, MODEL_NAME="tiny-org/tiny-llama", HF_ENDPOINT=hub.url)
        del env["HF_HUB_OFFLINE"]
        supervisor = _run(env)
    assert WorkerState.READY in supervisor.seen
    assert WorkerState.LOADING in supervisor.seen
    assert supervisor.seen[-1] is WorkerState.STOPPED
