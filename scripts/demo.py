"""The embedded default: the worker on a tiny local model, vLLM's CPU build, and the
RunPod SDK's local API server on 127.0.0.1. Prints each phase with seconds, then a
working request (curl and Python) and its answer.

Then what this worker is for, on the same model (no second download or build): a start
that cannot succeed, ``MAX_MODEL_LEN`` above the model's 2048 positions. First with
``PREFLIGHT=false``, so vLLM itself tries, fails and prints why: the same request gets
the cause and the fix as the job's error, the worker stays up (no restart, no
re-download), and ``diagnose`` reads that start's real vLLM log. Then with the
pre-flight on (the default): the same answer before vLLM is even spawned. Every worker
is stopped before the next starts; nothing is left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.vllm_env import build_tiny_model, events, free_port, worker_env  # noqa: E402

BODY = {
    "input": {
        "openai_route": "/v1/chat/completions",
        "openai_input": {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
    }
}
TOO_LONG = "8192"  # the tiny model has 2048 positions (max_position_embeddings)


class Worker:
    """``python -m worker`` with the SDK's local API server, its output in ``folder``."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/runsync"
        self.started = time.monotonic()
        cmd = [sys.executable, "-m", "worker", "--rp_serve_api", "--rp_api_host", "127.0.0.1"]
        cmd += ["--rp_api_port", str(self.port)]
        with (folder / "worker.out").open("wb") as out, (folder / "worker.err").open("wb") as err:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True
            )
        self.shown = 0

    def show_phases(self) -> None:
        """Print the state changes not printed yet, with seconds since the start."""
        changes = [e for e in events(self.folder) if e.get("event") == "worker.state_changed"]
        for e in changes[self.shown :]:
            seconds = time.monotonic() - self.started
            print(f"  [{seconds:6.1f} s] {e['source']} -> {e['dest']}", flush=True)
        self.shown = len(changes)

    def ask(self, body: dict) -> dict | None:
        """POST ``body`` to /runsync (held until the worker has settled), printing the
        phases meanwhile; None if the worker exited first."""
        answer: list[dict] = []

        def post() -> None:
            while self.proc.poll() is None:
                try:
                    answer.append(httpx.post(self.url, json=body, timeout=300).json())
                    return
                except httpx.TransportError:
                    time.sleep(0.3)  # the local API server is not listening yet

        asking = threading.Thread(target=post, daemon=True)
        asking.start()
        while asking.is_alive():
            self.show_phases()
            asking.join(0.2)
        self.show_phases()
        return answer[0] if answer else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)


def main() -> int:
    started = time.monotonic()
    try:
        return demo()
    finally:
        print(f"\ndemo: {time.monotonic() - started:.1f} s in all", flush=True)


def demo() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="vllm-worker-demo-"))
    print(f"building a tiny random model in {tmp / 'model'} (no download) ...", flush=True)
    model = build_tiny_model(tmp / "model")

    def env_for(folder: Path, **extra: str) -> dict[str, str]:
        env = worker_env(
            folder, MODEL_NAME=str(model), OPENAI_SERVED_MODEL_NAME_OVERRIDE="tiny-demo", **extra
        )
        env.pop("HF_TOKEN", None)
        return env

    print("starting the worker (vLLM CPU build; about a minute on 2 cores):", flush=True)
    worker = Worker(tmp / "ok", env_for(tmp / "ok"))
    try:
        answer = worker.ask(BODY)
        if answer is None:
            print(f"the worker exited with {worker.proc.returncode}; its log: {worker.folder}")
            return 1
        print("\nrequest:")
        print(f"  curl -s {worker.url} -H 'Content-Type: application/json' -d '{json.dumps(BODY)}'")
        print(f"  python: httpx.post({worker.url!r}, json={BODY!r}).json()")
        print("answer:")
        print(json.dumps(answer, indent=2)[:3000])
        print(f"\nlogs: {worker.folder}/worker.out (vLLM's output), worker.err (worker events)")
    finally:
        worker.stop()
    return failed_start(tmp, env_for)


def failed_start(tmp: Path, env_for: Callable[..., dict[str, str]]) -> int:
    print(
        f"\n== what this worker is for: a start that cannot succeed ==\n"
        f"the same model with MAX_MODEL_LEN={TOO_LONG} (it has 2048 positions) and "
        "PREFLIGHT=false:\nvLLM itself tries, fails and prints why; the worker reads that "
        "output.",
        flush=True,
    )
    folder = tmp / "max-model-len"
    worker = Worker(folder, env_for(folder, MAX_MODEL_LEN=TOO_LONG, PREFLIGHT="false"))
    try:
        answer = worker.ask(BODY)
        still_up = worker.proc.poll() is None
    finally:
        worker.stop()
    error = job_error(answer)
    if error is None:
        print(f"expected a failed job, got {answer!r}; logs: {folder}")
        return 1
    print("the same chat request gets the cause and the fix (JSON text in the job's error):")
    print(f"  {json.dumps(error, ensure_ascii=False)}")
    print(
        f"the worker {'stayed up, answering every job so' if still_up else 'had exited'} "
        "(no crash loop, no re-download); stopped.\n"
    )
    log = folder / "worker.out"
    print(f"$ diagnose {log}    # the same start's vLLM output, read offline", flush=True)
    diagnosed = subprocess.run(
        [sys.executable, "-m", "diagnostics.command.cli", str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    print(diagnosed.stdout.rstrip())
    if diagnosed.returncode != 1:
        print(f"diagnose exited {diagnosed.returncode}: {diagnosed.stderr.strip()}")
        return 1

    print(
        "\nwith the pre-flight on (the default), the same mistake is answered before vLLM "
        "is spawned:",
        flush=True,
    )
    folder = tmp / "max-model-len-preflight"
    worker = Worker(folder, env_for(folder, MAX_MODEL_LEN=TOO_LONG))
    try:
        answer = worker.ask(BODY)
    finally:
        worker.stop()
    spawned = [e for e in events(folder) if e.get("event") == "vllm.spawning"]
    error = job_error(answer)
    if error is None or spawned:
        print(f"expected a failed job and no vLLM, got {answer!r}; logs: {folder}")
        return 1
    print(f"  {error['rule']}: {error['message']}")
    print(f"\nlogs: {tmp}/max-model-len/ and {tmp}/max-model-len-preflight/")
    return 0


def job_error(answer: dict | None) -> dict | None:
    """A failed start's answer. The RunPod SDK carries it as text holding JSON: in the
    job's ``error`` on RunPod's queue; from the SDK's local API server, in the one item
    of the job's output."""
    if answer is None:
        return None
    text = answer.get("error")
    output = answer.get("output")
    if text is None and isinstance(output, list) and output and isinstance(output[0], dict):
        text = output[0].get("error")
    if not isinstance(text, str):
        return None
    try:
        error = json.loads(text)
    except ValueError:
        return None
    return error if isinstance(error, dict) and "rule" in error else None


if __name__ == "__main__":
    sys.exit(main())
