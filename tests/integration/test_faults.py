"""Fault injection: each case states the fault, the expected state, what jobs receive,
and that nothing is lost. Outcomes are recorded for docs/reliability.md."""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

from diagnostics import load_pack
from tests.support.queue_server import QueueServer
from tests.support.scripted_vllm import standin_env
from tests.support.vllm_env import (
    ROOT,
    events,
    group_alive,
    needs_vllm,
    replay_env,
    run_python,
    stand_in,
    stand_in_argv,
    stand_in_env,
    start_worker,
    tiny_model_env,
    worker_env,
)
from worker.config.settings import load_settings
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor, Timing


def test_output_flood_is_drained_with_bounded_memory(tmp_path, reliability):
    """A stand-in floods 30k lines (plus 20 lines of 1 MB and invalid UTF-8, ~23 MB) then a
    real CUDA failure line: the supervisor reads it all, classifies the last line,
    and its memory stays bounded."""
    with QueueServer() as queue:
        env = stand_in_env(
            tmp_path,
            stand_in("flood", "30000"),
            TRANSIENT_ANSWER_TIMEOUT="1",
            **queue.env(),
        )
        wrapper = textwrap.dedent(
            """
            import resource, subprocess, sys
            code = subprocess.call([sys.executable, "-m", "worker"], stdout=subprocess.DEVNULL)
            print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        )
        result = run_python(["-c", wrapper], env, timeout=600)
    (tmp_path / "worker.err").write_text(result.stderr)
    code, max_rss_kb = map(int, result.stdout.split())
    failed = [e for e in events(tmp_path) if e.get("event") == "worker.failed"]
    assert code == 1
    assert failed and failed[0]["category"] == "cuda_fault"  # the line after the flood was read
    assert failed[0]["evidence_line"] > 30_000
    assert max_rss_kb < 400 * 1024, f"peak RSS {max_rss_kb} kB"
    reliability(
        "vLLM output flood: 30k lines, 1 MB lines, invalid UTF-8 (stand-in)",
        "failed-transient (cuda_fault from the last line)",
        f"drained to the end; peak RSS {max_rss_kb // 1024} MB; exit 1",
    )


def test_stopped_vllm_hits_the_stall_limit(tmp_path, reliability):
    """vLLM stopped (SIGSTOP) while loading: a stand-in that prints a real loading line
    and keeps printing until it is stopped, so only the stall limit can end the start."""
    command = stand_in_argv("scripted_vllm")
    command += ["--say", "INFO Starting to load model stand-in/model...", "chatter"]
    env = worker_env(
        tmp_path,
        MODEL_NAME="stand-in/model",
        VLLM_COMMAND=shlex.join(command),
        VLLM_STALL_TIMEOUT="1",
        VLLM_SHUTDOWN_GRACE="1",  # a stopped process gets SIGKILL after it
    )
    timing = Timing(sample_every_s=0.1)
    supervisor = Supervisor(
        load_settings(env), load_pack(), env, passthrough=io.BytesIO(), timing=timing
    )

    def stop_when_loading(state: WorkerState) -> None:
        if state is WorkerState.LOADING:
            os.killpg(supervisor.process.pid, signal.SIGSTOP)

    supervisor.effects.observers.append(stop_when_loading)
    supervisor.run_in_thread()
    assert supervisor.settled.wait(60)
    pgid = supervisor.process.pid
    assert supervisor.wait_stopped(60)
    assert supervisor.state is WorkerState.FAILED_TRANSIENT
    assert "stalled while loading" in supervisor.diagnosis.cause
    assert "VLLM_STALL_TIMEOUT=1" in supervisor.diagnosis.cause
    assert not group_alive(pgid)
    reliability(
        "vLLM stopped (SIGSTOP) while loading (stand-in)",
        "failed-transient",
        "stall limit names the phase (loading); process group killed",
    )


def test_disk_full_is_named_and_an_unwritable_ledger_is_not_fatal(tmp_path, reliability):
    """The HF cache filled up (a real vLLM 0.32 log of ENOSPC during the download, replayed:
    the disk itself cannot be filled safely in a test), and the crash-loop ledger cannot be
    written (its folder is a file): the job gets the disk's cause (huggingface_hub's warning
    that the disk is short, before the write that failed), the worker exits 1."""
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / ".vllm-worker").write_text("a file where the ledger folder should be")
    fixture = ROOT / "fixtures/vllm-0.32/disk-full-download.log"
    with QueueServer() as queue:
        env = replay_env(
            tmp_path,
            fixture,
            BASE_PATH=str(volume),
            **queue.env(),
        )
        job = queue.submit({"prompt": "x"})
        proc = start_worker(env, tmp_path)
        assert proc.wait(120) == 1
        error = json.loads(queue.results[job]["error"])
    assert error["type"] == "prestart_failed" and error["rule"] == "hub-disk-space-short"
    assert "container disk" in error["message"] and "free" in error["message"]
    assert any(e.get("event") == "breaker.ledger_unwritable" for e in events(tmp_path))
    reliability(
        "disk full in the HF cache; crash-loop ledger unwritable",
        "failed-transient",
        "job told the disk is full and what to resize; ledger problem logged, not fatal; exit 1",
    )


@needs_vllm
@pytest.mark.vllm
def test_sigterm_while_vllm_loads_kills_its_group(tmp_path, reliability):
    """vLLM 0.32 ignores SIGTERM while its engine initialises: the worker must escalate."""
    env = tiny_model_env(tmp_path, VLLM_SHUTDOWN_GRACE="3")
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pgid = None
    lines = []
    for line in proc.stderr:  # blocks until the worker writes: no polling
        lines.append(line)
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "vllm.spawned":
            pgid = event["pid"]
        if event.get("event") == "worker.state_changed" and event.get("dest") == "loading":
            break
    assert pgid is not None, "".join(lines[-20:])
    os.killpg(proc.pid, signal.SIGTERM)
    with proc.stderr:
        lines += proc.stderr.read().splitlines(keepends=True)
    assert proc.wait(60) == 0
    assert not group_alive(pgid)
    stopped = [json.loads(x) for x in lines if '"worker.state_changed"' in x and '"stopped"' in x]
    assert stopped, "".join(lines[-20:])
    reliability(
        "SIGTERM while vLLM loads (vLLM ignores SIGTERM then)",
        "stopped",
        "SIGTERM, then SIGKILL after VLLM_SHUTDOWN_GRACE; vLLM's process group gone; exit 0",
    )


def test_vllm_killed_with_jobs_in_flight(tmp_path, reliability):
    """vLLM SIGKILLed while ten jobs stream from it. A stand-in whose streams never end
    (tests/support/scripted_vllm.py): no job can finish before the kill, whatever the
    machine's speed, and no shared worker is ended for the tests after this one."""
    with QueueServer() as queue:
        env = worker_env(
            tmp_path, **standin_env(tmp_path, "serve"), MAX_CONCURRENCY="10", **queue.env()
        )
        proc = start_worker(env, tmp_path)
        jobs = [
            queue.submit(
                {
                    "openai_route": "/v1/completions",
                    "openai_input": {"prompt": f"{i}", "stream": True},
                }
            )
            for i in range(10)
        ]
        queue.wait_for(lambda: all(queue.job(j).stream for j in jobs), 120, "every job streaming")
        spawned = next(e for e in events(tmp_path) if e.get("event") == "vllm.spawned")
        os.killpg(spawned["pid"], signal.SIGKILL)
        answers = [queue.wait_done(job, 60) for job in jobs]
        assert proc.wait(60) != 0
    assert all(json.loads(a["error"])["type"] == "upstream_error" for a in answers)
    assert not group_alive(spawned["pid"])
    reliability(
        "vLLM SIGKILLed mid-stream with 10 jobs in flight (stand-in)",
        "failed-transient",
        "all 10 jobs ended with an upstream_error; worker exit 1; no process left",
    )
