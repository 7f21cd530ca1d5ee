"""Run the worker on a tiny local model against a local job queue and answer a chat job.

Prints each phase the worker goes through (with seconds), the request as a job input
and as an OpenAI-client call, and the answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.queue_server import QueueServer  # noqa: E402
from tests.support.vllm_env import build_tiny_model, events, start_worker, worker_env  # noqa: E402

JOB = {
    "openai_route": "/v1/chat/completions",
    "openai_input": {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
}


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="vllm-worker-demo-"))
    print(f"building a tiny random model in {tmp / 'model'} ...", flush=True)
    model = build_tiny_model(tmp / "model")
    with QueueServer() as queue:
        env = worker_env(
            tmp, MODEL_NAME=str(model), OPENAI_SERVED_MODEL_NAME_OVERRIDE="tiny-demo", **queue.env()
        )
        job = queue.submit(JOB)
        print("job input queued before the worker starts:\n  " + json.dumps(JOB), flush=True)
        started = time.monotonic()
        proc = start_worker(env, tmp)
        seen = 0
        try:
            while not queue.results.get(job):
                if proc.poll() is not None:
                    print(f"worker exited with {proc.returncode}; see {tmp}/worker.err")
                    return 1
                changes = [e for e in events(tmp) if e.get("event") == "worker.state_changed"]
                for e in changes[seen:]:
                    print(
                        f"  [{time.monotonic() - started:6.1f} s] {e['source']} -> {e['dest']}",
                        flush=True,
                    )
                seen = len(changes)
                # Not done within a second: show progress and keep waiting.
                with contextlib.suppress(Exception):
                    queue.wait_done(job, timeout=1)
            print("answer (job output):")
            print(json.dumps(queue.results[job], indent=2)[:2000])
            print(
                "\nOn RunPod the same request with the OpenAI client:\n"
                "  OpenAI(base_url='https://api.runpod.ai/v2/<endpoint>/openai/v1', api_key=...)"
                ".chat.completions.create(model='tiny-demo', messages=[...])\n"
                f"Logs: {tmp}/worker.out (vLLM), {tmp}/worker.err (worker events)"
            )
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
