"""A stand-in for vLLM's HTTP server that never holds a request body: for the tests of the
load-balancing limits, where a body of hundreds of MiB must pass through the worker and
the stand-in's own memory must not be what is measured.

Run as the worker's ``VLLM_COMMAND``; the worker appends ``--host H --port P``::

    python -m tests.worker.lb.sink_vllm [--host H] [--port P]

* ``GET /health``          200
* any other request        200 and ``{"bytes": N, "path": P}``: the body's size, counted
                           chunk by chunk and dropped

uvicorn's "Application startup complete" line is the ready marker vLLM prints too.
"""

from __future__ import annotations

import argparse
import json
import sys

import uvicorn


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"" if scope["path"] == "/health" else json.dumps({"bytes": size, "path": scope["path"]})
    data = body.encode() if isinstance(body, str) else body
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _vllm_args = parser.parse_known_args()
    print("INFO Starting vLLM sink stand-in", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", lifespan="off")


if __name__ == "__main__":
    sys.exit(main())
