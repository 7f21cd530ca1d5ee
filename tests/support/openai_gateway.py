"""RunPod's OpenAI-compatible gateway, on 127.0.0.1, in front of a ``QueueServer``: what
``https://api.runpod.ai/v2/<endpoint>/openai/v1/...`` does for a queue endpoint, so the
README's client examples (openai, anthropic) run against a real worker.

As the platform does (``shared/notes/runpod-job-protocol.md``): a request to
``/v2/<endpoint>/openai/v1/<route>`` with body B becomes the job
``{"openai_route": "/v1/<route>", "openai_input": B}`` (no ``openai_input`` without a
body); a streaming request gets the job's streamed SSE text relayed as it arrives,
otherwise the job's one output object is the answer. A job that ends with an error
answers with the error's ``code`` as the HTTP status (500 without one) and the error
object as the body. Stdlib only; the API key is not checked.

    with QueueServer() as queue, OpenAIGateway(queue) as gateway:
        OpenAI(base_url=f"{gateway.url}/v2/ep/openai/v1", api_key="x")
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.queue_server import JobRecord, QueueServer

_PATH = re.compile(r"/v2/[^/]+/openai(?P<route>/v1/[^?]*)")
TIMEOUT_S = 120.0


class OpenAIGateway:
    def __init__(self, queue: QueueServer) -> None:
        self.queue = queue
        self.jobs: list[str] = []  # ids of the jobs made, in order
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> OpenAIGateway:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def job_input(self, route: str, body: Any) -> dict[str, Any]:
        job: dict[str, Any] = {"openai_route": route}
        if body:
            job["openai_input"] = body
        return job

    def submit(self, route: str, body: Any) -> str:
        job_id = self.queue.submit(self.job_input(route, body))
        self.jobs.append(job_id)
        return job_id


def _error_answer(done: dict[str, Any]) -> tuple[int, Any]:
    try:
        error = json.loads(done["error"])
    except (TypeError, ValueError):
        error = {"message": str(done["error"])}
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return status, {"error": error}


def _handler(gateway: OpenAIGateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._relay(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            self._relay(json.loads(raw) if raw else None)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _relay(self, body: Any) -> None:
            match = _PATH.fullmatch(self.path.split("?", 1)[0])
            if match is None:
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            job_id = gateway.submit(match["route"], body)
            if isinstance(body, dict) and body.get("stream") is True:
                self._stream(job_id)
                return
            done = gateway.queue.wait_done(job_id, TIMEOUT_S)
            if done.get("error"):
                self._json(*_error_answer(done))
                return
            output = done.get("output")
            self._json(200, output[0] if isinstance(output, list) and len(output) == 1 else output)

        def _stream(self, job_id: str) -> None:
            queue = gateway.queue
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            sent = 0

            def progressed() -> JobRecord | None:
                record = queue.job(job_id)
                return record if record.done is not None or len(record.stream) > sent else None

            while True:
                record = queue.wait_for(progressed, TIMEOUT_S, f"{job_id} streamed or done")
                for chunk in record.stream[sent:]:
                    output = chunk.get("output")
                    if isinstance(output, str):
                        self.wfile.write(output.encode())
                    self.wfile.flush()
                sent = len(record.stream)
                if record.done is not None:
                    return

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
