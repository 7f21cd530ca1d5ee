"""The pre-flight end to end: the worker stops a start that cannot succeed before vLLM is
spawned and before a weight byte moves, and jobs get the answer a failed launch gives.

Where a recorded vLLM 0.32 fixture already shows vLLM failing the same way (too long,
unsupported architecture, custom code, gated, missing, no KV memory: see
tests/worker/preflight/test_preflight_wording.py), no vLLM is started; the one prediction without a
fixture (a missing revision) is confirmed against the real vLLM CPU build once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from huggingface_hub import constants

from diagnostics import classify_lines
from tests.support.hub_server import Described, HubServer
from tests.support.packs import shipped_pack
from tests.support.queue_server import QueueServer
from tests.support.tiny_model import HUB_CONFIG as CONFIG
from tests.support.vllm_env import (
    QUIET_ENV,
    ROOT,
    VLLM_PYTHON,
    events,
    needs_vllm,
    stand_in,
    start_worker,
    worker_env,
)
from worker.preflight import run_preflight

PACK = shipped_pack()
BIG = {  # 141 GB of bf16 weights, described by the hub, never stored or served
    "model-00001-of-00002.safetensors": Described(80 * 10**9, {"BF16": 40 * 10**9}),
    "model-00002-of-00002.safetensors": Described(61 * 10**9, {"BF16": 30_500_000_000}),
}
CASES = {  # repo -> (config, rule a failed launch gives, category)
    "tiny-org/gated-llama": (CONFIG, "gated-repo", "gated_model"),
    "org/frob": (
        {**CONFIG, "architectures": ["FrobForCausalLM"]},
        "architecture-not-supported",
        "model_requirement",
    ),
    "org/big": ({**CONFIG, "torch_dtype": "bfloat16"}, "host-memory-exhausted", "oom"),
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("repos")
    repos = {}
    for repo, (config, _rule, _category) in CASES.items():
        folder = root / repo.replace("/", "--")
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        if repo != "org/big":
            (folder / "model.safetensors").write_bytes(bytes(4096))
        repos[repo] = folder
    with HubServer(repos, gated={"tiny-org/gated-llama"}, described={"org/big": BIG}) as server:
        yield server


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    return proc.wait(60)


def test_a_model_too_large_fails_before_launch_without_a_weight_byte(hub, tmp_path):
    """141 GB of weights against this machine's memory (vLLM's CPU build): the worker
    settles failed-permanent and answers every job; nothing was spawned or downloaded."""
    repo = "org/big"
    _config, rule, category = CASES[repo]
    before = hub.weight_bytes_served
    errors, seen = _answers(hub, tmp_path, repo, MAX_MODEL_LEN="1024")
    for error in errors:
        assert (error["type"], error["code"]) == ("startup_error", None)
        assert (error["rule"], error["category"]) == (rule, category)
        assert "GiB per device" in error["message"] and "before launch" in error["message"]
    assert not [e for e in seen if e.get("event") in ("vllm.spawning", "vllm.spawned")]
    preflight = [e for e in seen if e.get("event") == "worker.preflight"]
    assert len(preflight) == 1 and preflight[0]["preflight_verdict"] == rule
    assert hub.weight_bytes_served == before


def _answers(hub, tmp_path, repo: str, **extra: str) -> tuple[list[dict], list[dict]]:
    """The error answers two jobs get from a worker on ``repo``, and its events."""
    tmp_path.mkdir(exist_ok=True)
    with QueueServer() as queue:
        env = worker_env(tmp_path, MODEL_NAME=repo, **queue.env())
        del env["HF_HUB_OFFLINE"]
        env.update(HF_ENDPOINT=hub.url, **extra)
        jobs = [queue.submit({"openai_route": "/v1/models"}) for _ in range(2)]
        proc = start_worker(env, tmp_path)
        try:
            errors = [json.loads(queue.wait_done(j, 60)["error"]) for j in jobs]
        finally:
            assert _stop(proc) == 0
    return errors, events(tmp_path)


def test_jobs_get_the_answer_of_a_failed_launch_plus_what_was_measured(hub, tmp_path):
    """PREFLIGHT=false launches "vLLM" (a stand-in replaying vLLM 0.32's real output for
    this gated repo); with the pre-flight, the answer is the same, found before launch."""
    repo = "tiny-org/gated-llama"
    fixture = ROOT / "fixtures/vllm-0.32/hub-gated.log"
    replay = stand_in("replay_log", str(fixture), "1")
    off, off_events = _answers(hub, tmp_path / "off", repo, PREFLIGHT="false", VLLM_COMMAND=replay)
    on, on_events = _answers(hub, tmp_path / "on", repo, VLLM_COMMAND=replay)
    assert [e["event"] for e in off_events if e["event"] == "vllm.spawning"] == ["vllm.spawning"]
    assert not [e for e in off_events if e["event"] == "worker.preflight"]
    assert not [e for e in on_events if e["event"] == "vllm.spawning"]
    for launched, predicted in zip(off, on, strict=True):
        keys = ("type", "code", "category", "rule")
        assert {k: predicted[k] for k in keys} == {k: launched[k] for k in keys}
        cause, _, fix = launched["message"].partition(" Accept")
        assert predicted["message"].startswith(cause + " ")
        assert predicted["message"].endswith(" Accept" + fix)
        assert "before launch" in predicted["message"]
        assert "before launch" not in launched["message"]


def test_a_host_failing_the_sdk_checks_answers_one_job_and_exits(tmp_path):
    """The SDK's memory check fails by its own knob; the pre-flight ran it, so the SDK's
    start does not os._exit(1): a job gets the diagnosis, then the worker exits 1."""
    with QueueServer() as queue:
        env = worker_env(tmp_path, MODEL_NAME="/nonexistent-model", **queue.env())
        del env["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"]  # the memory check fails before network
        env.update(RUNPOD_MIN_MEMORY_GB="100000", TRANSIENT_ANSWER_TIMEOUT="30")
        job = queue.submit({"prompt": "hi"})
        proc = start_worker(env, tmp_path)
        try:
            error = json.loads(queue.wait_done(job, 60)["error"])
            code = proc.wait(60)
        finally:
            _stop(proc)
    assert code == 1
    assert error["type"] == "prestart_failed" and error["rule"] == "host-fitness-check"
    assert "memory_check" in error["message"] and "Insufficient memory" in error["message"]
    assert not [e for e in events(tmp_path) if e.get("event") == "vllm.spawning"]


@needs_vllm
@pytest.mark.vllm
def test_vllm_itself_fails_on_a_missing_revision_as_predicted(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    model = tmp_path / "ok"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIG))
    (model / "model.safetensors").write_bytes(bytes(4096))
    with HubServer({"org/ok": model}) as hub:
        settings = type(
            "S", (), {"model": "org/ok", "vllm_args": ["--model", "org/ok", "--revision", "v9"]}
        )
        predicted = run_preflight(settings, {"HF_ENDPOINT": hub.url}, pack=PACK).diagnosis
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
        env.update(QUIET_ENV, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
        done = subprocess.run(
            [
                str(VLLM_PYTHON),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "org/ok",
                "--revision",
                "v9",
                "--dtype",
                "float32",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert hub.weight_bytes_served == 0
    seen = classify_lines((done.stdout + done.stderr).splitlines(), PACK)
    assert done.returncode != 0 and seen.failed
    assert predicted is not None
    assert (predicted.rule, predicted.category, predicted.state) == (
        seen.rule,
        seen.category,
        seen.state,
    )
    assert predicted.fix == seen.fix
