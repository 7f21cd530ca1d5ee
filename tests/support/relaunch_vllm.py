"""A stand-in for vLLM that behaves differently on each start of the same worker: for the
relaunch tests (worker/supervision/relaunch.py). Run as ``VLLM_COMMAND``:

    python -m tests.support.relaunch_vllm SCRIPT.json [vLLM's arguments...]

SCRIPT.json is a list with one entry per start (the last one repeats):
``{"say": [lines...], "then": "exit:N" | "serve"}``. Each start appends one JSON line to
SCRIPT.json + ".starts" with its arguments and ``VLLM_CACHE_ROOT``, so a test sees what
every relaunch was given. ``serve`` answers ``GET /health`` and ``GET /v1/models`` (with
``max_model_len`` from ``--max-model-len``, or 2048) on ``--port`` and prints vLLM's
ready line. The lines to say are real vLLM lines (the tests take them from fixtures/).
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from pathlib import Path


def _arg(argv: list[str], flag: str) -> str | None:
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            return argv[index + 1]
    return None


def _serve(port: int, max_model_len: int) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                model = {"id": "stand-in/model", "object": "model", "max_model_len": max_model_len}
                body = json.dumps({"object": "list", "data": [model]}).encode()
            else:
                body = b""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("INFO:     Application startup complete.", flush=True)
    threading.Event().wait()


def main(argv: list[str]) -> int:
    script = Path(argv[0])
    rest = argv[1:]
    starts = script.with_name(script.name + ".starts")
    with starts.open("a", encoding="utf-8") as handle:
        seen = {"args": rest, "VLLM_CACHE_ROOT": os.environ.get("VLLM_CACHE_ROOT")}
        handle.write(json.dumps(seen) + "\n")
    number = len(starts.read_text(encoding="utf-8").splitlines()) - 1
    steps = json.loads(script.read_text(encoding="utf-8"))
    step = steps[min(number, len(steps) - 1)]
    for line in step.get("say", []):
        print(line, flush=True)
    then = step.get("then", "exit:1")
    if then == "serve":
        length = _arg(rest, "--max-model-len")
        _serve(int(_arg(rest, "--port") or 0), int(length) if (length or "").isdigit() else 2048)
    return int(then.split(":", 1)[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
