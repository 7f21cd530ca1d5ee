"""The crash-loop breaker: pure judgement, the ledger on disk, and the worker tripping it."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from diagnostics import Category, Diagnosis, State
from tests.support.queue_server import QueueServer
from tests.support.vllm_env import ROOT, replay_env, start_worker
from worker.crashloop.breaker import RestartLedger, config_key, judge

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
    # no temp files left (the lock file stays: removing it would race other workers)
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["ledger.json", "ledger.json.lock"]


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


@pytest.mark.parametrize(
    "entry",
    [
        {"at": "yesterday", "category": "cuda_fault"},
        None,
        {"at": None},
        {"at": 1000.0, "category": ["not", "text"]},
        {"at": 1000.0, "category": {"x": 1}},
        {"at": float("nan")},
        {"at": True, "category": "x"},
        {"at": 1000.0, "category": "x" * 10_000},
        "a string",
    ],
    ids=repr,
)
def test_a_bad_ledger_entry_is_ignored_never_fatal(tmp_path, entry):
    path = tmp_path / "ledger.json"
    good = {"at": 990.0, "category": "network"}
    path.write_text(json.dumps({"k": [entry, good], "other": "not a list"}))
    ledger = RestartLedger(path, Clock())
    assert ledger.recent("k", 60) == [good]
    assert ledger.recent("other", 60) == []
    tripped = judge(CUDA, [*ledger.recent("k", 60), good], 2, 1800, "ledger")
    assert tripped.rule == "crash-loop-breaker"
    ledger.record("k", "cuda_fault", 60)
    assert [e["category"] for e in ledger.recent("k", 60)] == ["network", "cuda_fault"]
    ledger.clear("k")


@pytest.mark.parametrize(
    "content", [b"[1, 2]", b"null", b"\xff\xfe", b"[" * 100_000, b"{}" + b" " * (2 << 20)]
)
def test_a_ledger_that_is_not_ours_is_ignored(tmp_path, content):
    path = tmp_path / "ledger.json"
    path.write_bytes(content)
    ledger = RestartLedger(path, Clock())
    assert ledger.recent("k", 60) == []
    ledger.record("k", "network", 60)
    assert [e["category"] for e in ledger.recent("k", 60)] == ["network"]


def _record_many(path: str, barrier, count: int) -> None:
    ledger = RestartLedger(Path(path), time.time)
    barrier.wait()
    for _ in range(count):
        ledger.record("shared", "cuda_fault", 3600)


def test_concurrent_writers_lose_no_failure(tmp_path, reliability):
    """8 workers sharing a volume fail at once: every failure is counted."""
    context = multiprocessing.get_context("fork")
    path = tmp_path / "volume" / "ledger.json"
    barrier = context.Barrier(8)
    procs = [context.Process(target=_record_many, args=(str(path), barrier, 5)) for _ in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(RestartLedger(path, time.time).recent("shared", 3600)) == 40
    reliability(
        "8 worker processes record 5 failures each at once in one shared ledger",
        "every failure counted",
        "40 of 40 entries kept (file lock + atomic replace)",
    )


def test_key_tells_models_apart_and_drops_every_secret_form():
    base = ["vllm", "serve"]
    assert config_key(base, ["--model", "org/hf_alpha"]) != config_key(
        base, ["--model", "org/hf_beta"]
    )
    plain = config_key(base, ["--model", "m"])
    for secret_args in (
        ["--api-key", "abc123456"],
        ["--api-key=abc123456"],
        ["--hf-token", "not-hf-shaped-value"],
    ):
        assert config_key(base, ["--model", "m", *secret_args]) == plain
    a = config_key(base, ["--model", "https://user:pass1@host/m"])
    b = config_key(base, ["--model", "https://user:pass2@host/m"])
    assert a == b


def test_worker_trips_the_breaker_on_the_third_transient_failure(tmp_path, reliability):
    volume = tmp_path / "volume"
    volume.mkdir()
    codes, answers = [], []
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            CUDA_FIXTURE,
            BASE_PATH=str(volume),
            CRASH_LOOP_LIMIT="2",
            TRANSIENT_ANSWER_TIMEOUT="1",
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
