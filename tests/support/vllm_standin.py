"""A stand-in for vLLM's HTTP server, for tests of the load-balancing proxy that need
control real vLLM does not give: an answer that waits until the test releases it, and
a way to learn that the proxy cancelled a request upstream.

Run as the worker's ``VLLM_COMMAND``; the worker appends ``--host H --port P``::

    python -m tests.support.vllm_standin [--loading] [--host H] [--port P]

``--loading``: print one of vLLM's loading lines and stay loading until stopped (never
ready). Otherwise serve with uvicorn (whose "Application startup complete" line is the
ready marker vLLM prints too):

* ``GET /health``                  200
* any method ``/echo/...``         200 (or the status in ``x-status``) and JSON with the
                                   method, path, query string, headers and body received;
                                   response header ``x-upstream: echo``
* ``POST /v1/stream``               an SSE stream: ``data: first``, then (once released)
                                   ``data: second`` and ``data: [DONE]``
* ``POST /release``                releases the streams waiting now
* ``GET /cancelled``               waits until a stream's client went away, then 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys


class StandIn:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if path == "/health":
            await _send(send, 200, b"")
        elif path.startswith("/echo/"):
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            answer = {
                "method": method,
                "path": path,
                "query": scope["query_string"].decode(),
                "headers": headers,
                "body": body.decode(),
            }
            status = int(headers.get("x-status", "200"))
            await _send(send, status, json.dumps(answer).encode(), [(b"x-upstream", b"echo")])
        elif path == "/v1/stream":
            await self._stream(receive, send)
        elif path == "/release":
            self.release.set()
            self.release = asyncio.Event()  # streams started later wait for the next one
            await _send(send, 200, b"{}")
        elif path == "/cancelled":
            await self.cancelled.wait()
            await _send(send, 200, b"{}")
        else:
            await _send(send, 404, b'{"detail": "Not Found"}')

    async def _stream(self, receive, send) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        gone = asyncio.ensure_future(_until_disconnect(receive))
        released = asyncio.ensure_future(self.release.wait())
        await asyncio.wait((gone, released), return_when=asyncio.FIRST_COMPLETED)
        if gone.done():
            released.cancel()
            self.cancelled.set()
            return
        gone.cancel()
        rest = b"data: second\n\ndata: [DONE]\n\n"
        await send({"type": "http.response.body", "body": rest, "more_body": False})


async def _until_disconnect(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send(send, status: int, body: bytes, extra: list | None = None) -> None:
    headers = [(b"content-type", b"application/json"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loading", action="store_true")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _vllm_args = parser.parse_known_args()
    if args.loading:
        print("INFO Starting to load model stand-in/model...", flush=True)
        signal.pause()
        return
    print("INFO Starting vLLM stand-in", flush=True)
    import uvicorn  # not before: a loading stand-in never serves (a tenth of a CPU-s)

    uvicorn.run(StandIn(), host=args.host, port=args.port, log_level="info", lifespan="off")


if __name__ == "__main__":
    sys.exit(main())
