"""The health check RunPod's load balancer probes (``/ping`` on ``PORT_HEALTH``).

RunPod reads 200 as healthy, 204 as still initializing, anything else as unhealthy
(the worker is replaced):

=================================== ====== ==========================================
state                               status why
=================================== ====== ==========================================
starting, downloading, loading      204    initializing: keep it, send nothing yet
ready                               200    serve
failed-permanent                    200    stay in the pool and answer every request
                                           with the diagnosis: every worker with this
                                           configuration fails the same way, and a
                                           replacement only repeats the download
failed-transient, stopped           503    replace this worker
=================================== ====== ==========================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from worker.lb.bodies import Answer
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

S = WorkerState
STATUS: Mapping[WorkerState, int] = {
    S.STARTING: 204,
    S.DOWNLOADING: 204,
    S.LOADING: 204,
    S.READY: 200,
    S.FAILED_PERMANENT: 200,
    S.FAILED_TRANSIENT: 503,
    S.STOPPED: 503,
}
_NOT_FOUND = Answer(404, [(b"content-type", b"text/plain")], b"Not Found")


def health(state: WorkerState, info: Mapping | None = None) -> Answer:
    """The health answer for ``state``; 204 has no body, the others say the state (and,
    when ready, the length vLLM serves: ``info["max_model_len"]``)."""
    status = STATUS[state]
    if status == 204:
        return Answer(204, [], b"")
    fields: dict = {"state": state.value}
    if state is S.READY and info and info.get("max_model_len"):
        fields["max_model_len"] = info["max_model_len"]
    body = json.dumps(fields).encode()
    return Answer(status, [(b"content-type", b"application/json")], body)


async def respond(send, answer: Answer) -> None:
    """Send ``answer`` as a whole ASGI HTTP response."""
    headers = answer.headers
    if answer.status != 204:
        headers = [*headers, (b"content-length", str(len(answer.body)).encode())]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


class HealthApp:
    """ASGI app for the health port: the health path answers the state, the rest 404."""

    def __init__(self, supervisor: Supervisor, path: str) -> None:
        self.supervisor = supervisor
        self.path = path

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == self.path:
            info = getattr(self.supervisor, "start_info", None)
            await respond(send, health(self.supervisor.state, info() if info else None))
        else:
            await respond(send, _NOT_FOUND)
