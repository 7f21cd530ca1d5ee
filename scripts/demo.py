"""The embedded default: the worker on a tiny local model, vLLM's CPU build, and the
RunPod SDK's local API server on 127.0.0.1. Prints each phase with seconds, then a
working request (curl and Python) and its answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
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


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="vllm-worker-demo-"))
    started = time.monotonic()
    print(f"building a tiny random model in {tmp / 'model'} (no download) ...", flush=True)
    model = build_tiny_model(tmp / "model")
    api_port = free_port()
    env = worker_env(tmp, MODEL_NAME=str(model), OPENAI_SERVED_MODEL_NAME_OVERRIDE="tiny-demo")
    env.pop("HF_TOKEN", None)
    cmd = [
        sys.executable,
        "-m",
        "worker",
        "--rp_serve_api",
        "--rp_api_host",
        "127.0.0.1",
        "--rp_api_port",
        str(api_port),
    ]
    print("starting the worker (vLLM CPU build; about a minute on 2 cores):", flush=True)
    with (tmp / "worker.out").open("wb") as out, (tmp / "worker.err").open("wb") as err:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=err, start_new_session=True
        )
    url = f"http://127.0.0.1:{api_port}/runsync"
    try:
        shown = 0
        while True:
            changes = [e for e in events(tmp) if e.get("event") == "worker.state_changed"]
            for e in changes[shown:]:
                print(
                    f"  [{time.monotonic() - started:6.1f} s] {e['source']} -> {e['dest']}",
                    flush=True,
                )
            shown = len(changes)
            if proc.poll() is not None:
                print(f"the worker exited with {proc.returncode}; its log: {tmp}/worker.err")
                return 1
            try:
                answer = httpx.post(url, json=BODY, timeout=120).json()
                break
            except httpx.TransportError:
                time.sleep(0.5)  # the local API server is not listening yet
        print("\nrequest:")
        print(f"  curl -s {url} -H 'Content-Type: application/json' -d '{json.dumps(BODY)}'")
        print(f"  python: httpx.post({url!r}, json={BODY!r}).json()")
        print("answer:")
        print(json.dumps(answer, indent=2)[:3000])
        print(f"\nlogs: {tmp}/worker.out (vLLM's output), {tmp}/worker.err (worker events)")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
