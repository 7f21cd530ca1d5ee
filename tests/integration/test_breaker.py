"""The crash-loop breaker: pure judgement, the ledger on disk, and the worker tripping it."""

from __future__ import annotations

import json
import os
import signal
import sys

from diagnostics import Category, Diagnosis, State
from tests.support.queue_server import QueueServer
from tests.support.vllm_env import ROOT, start_worker, worker_env
from worker.breaker import RestartLedger, config_key, judge

CUDA = Diagnosis(
    State.FAILED_TRANSIENT,
    Category.CUDA_FAULT,
    "gpu-runtime-fault",
    cause="GPU fault.",
    fix="Retry.",
)
OOM = Diagnosis(State.FAILED_PERMANENT, Category.OOM, "cuda-oom", cause="OOM.", fix="Smaller.")
CUDA_FIXTURE = (
    ROOT
    / "fixtures/corpus/cuda_fault/vllm-17344-v085-a100-qwen25vl-72b-awq-profile-illegal-memory-access.log"
)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_judge_trips_after_the_limit():
    history = [{"at": 1, "category": "cuda_fault"}, {"at": 2, "category": "network"}]
    assert judge(CUDA, history[:1], 2, 1800, "/v/ledger") is CUDA
    tripped = judge(CUDA, history, 2, 1800, "/v/ledger")
    assert tripped.state is State.FAILED_PERMANENT and tripped.permanent is True
    assert tripped.rule == "crash-loop-breaker"
    assert "3 times in 30 minutes" in tripped.cause and "2x cuda_fault" in tripped.cause
    assert "CRASH_LOOP_RESET=true" in tripped.fix and "/v/ledger" in tripped.fix
    assert judge(OOM, history, 2, 1800, "x") is OOM  # permanent already


def test_ledger_window_record_and_clear(tmp_path):
    clock = Clock()
    ledger = RestartLedger(tmp_path / "v" / "ledger.json", clock)
    ledger.record("k", "cuda_fault", 60)
    clock.now += 30
    ledger.record("k", "network", 60)
    assert [e["category"] for e in ledger.recent("k", 60)] == ["cuda_fault", "network"]
    clock.now += 45
    assert [e["category"] for e in ledger.recent("k", 60)] == ["network"]
    ledger.clear("k")
    assert ledger.recent("k", 60) == []
    assert [p.name for p in (tmp_path / "v").iterdir()] == ["ledger.json"]  # no temp files left


def test_corrupt_or_unwritable_ledger_is_ignored(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text("{not json")
    ledger = RestartLedger(path, Clock())
    assert ledger.recent("k", 60) == []
    ledger.record("k", "unknown", 60)  # overwrites the corrupt file
    assert json.loads(path.read_text())["k"][0]["category"] == "unknown"
    blocked = RestartLedger(tmp_path / "file" / "ledger.json", Clock())
    (tmp_path / "file").write_text("a file where a folder should be")
    blocked.record("k", "unknown", 60)  # logged, not raised
    assert blocked.recent("k", 60) == []


def test_key_ignores_tokens_but_not_flags():
    base = config_key(["vllm", "serve"], ["--model", "m"])
    assert (
        config_key(
            ["vllm", "serve"], ["--model", "m", "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz"]
        )
        == base
    )
    assert config_key(["vllm", "serve"], ["--model", "m", "--max-model-len", "9"]) != base


def test_worker_trips_the_breaker_on_the_third_transient_failure(tmp_path, reliability):
    volume = tmp_path / "volume"
    volume.mkdir()
    codes, answers = [], []
    with QueueServer() as queue:
        env = worker_env(
            tmp_path,
            MODEL_NAME="stand-in/model",
            BASE_PATH=str(volume),
            CRASH_LOOP_LIMIT="2",
            TRANSIENT_ANSWER_TIMEOUT="1",
            VLLM_COMMAND=f"{sys.executable} -m tests.support.replay_log {CUDA_FIXTURE} 1",
            **queue.env(),
        )
        for _ in range(2):
            proc = start_worker(env, tmp_path)
            codes.append(proc.wait(120))
        proc = start_worker(env, tmp_path)
        try:
            for _ in range(2):
                answers.append(
                    json.loads(queue.wait_done(queue.submit({"prompt": "x"}), 60)["error"])
                )
            assert proc.poll() is None  # the third start stays up
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(60) == 0
    assert codes == [1, 1]
    for answer in answers:
        assert answer["type"] == "startup_error" and answer["rule"] == "crash-loop-breaker"
        assert "3 times" in answer["message"] and "3x cuda_fault" in answer["message"]
    assert (volume / ".vllm-worker" / "restart-ledger.json").exists()
    reliability(
        "the same GPU fault on three starts in a row (stand-in replaying a real log)",
        "failed-transient twice, then failed-permanent",
        "exits 1, 1; the third start stays up and answers every job with the count and how to reset",
    )
