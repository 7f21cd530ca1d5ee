"""A stand-in for vLLM whose behaviour the test scripts: it prints the given lines, then
does one thing, so the supervisor's limits are tested in seconds, not with a real vLLM
start. Run as ``VLLM_COMMAND``; the worker appends ``--host H --port P``.

    python -m tests.support.scripted_vllm [--say LINE]... THEN [--host H --port P]

``standin_env(tmp_path, *script)`` is the worker environment that runs it.

THEN is one of:

* ``hang``          print nothing more, never exit (a stall, or the wait after a fatal line)
* ``chatter``       print a line every 50 ms, never exit (busy, but never ready)
* ``serve``         answer ``GET /health`` with 200 on PORT (any other GET with JSON
                    naming the path, any POST with a stream that never ends) and print
                    vLLM's ready line; exit 1 when ``/die`` is requested (vLLM dying
                    after ready)
* ``exit:N``        exit with code N
"""

from __future__ import annotations

import argparse
import http.server
import json
import shlex
import sys
import threading
import time
from pathlib import Path


def _serve(port: int) -> None:
    died = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = b"" if self.path in ("/health", "/die") else json.dumps({"path": self.path})
            data = body.encode() if isinstance(body, str) else body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if self.path == "/die":
                died.set()

        def do_POST(self) -> None:
            """An OpenAI-style stream that never ends: one chunk every 50 ms."""
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")  # as uvicorn sends vLLM's
            self.end_headers()
            chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]}
            event = f"data: {json.dumps(chunk)}\n\n".encode()
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                    time.sleep(0.05)  # the stand-in's pace, not a synchronisation
            except OSError:
                return

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("INFO:     Application startup complete.", flush=True)
    died.wait()
    print("RuntimeError: Engine core died unexpectedly.", flush=True)
    sys.exit(1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--say", action="append", default=[])
    parser.add_argument("then")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args, _ = parser.parse_known_args(argv)
    for line in args.say:
        print(line, flush=True)
    if args.then == "hang":
        threading.Event().wait()
    elif args.then == "chatter":
        while True:
            print("INFO still working", flush=True)
            time.sleep(0.05)  # the stand-in's pace, not a synchronisation
    elif args.then == "serve":
        _serve(args.port)
    elif args.then.startswith("exit:"):
        return int(args.then.split(":", 1)[1])
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def standin_env(tmp_path: Path, *script: str, **extra: str) -> dict[str, str]:
    """A worker environment whose vLLM is this stand-in running ``script``; no volume."""
    from tests.support.vllm_env import ROOT, free_port, stand_in_argv

    command = stand_in_argv("scripted_vllm", *script)
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "MODEL_NAME": "stand-in/model",
        "VLLM_COMMAND": shlex.join(command),
        "VLLM_PORT": str(free_port()),
        "BASE_PATH": str(tmp_path / "no-volume"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_SHUTDOWN_GRACE": "2",
        **extra,
    }
