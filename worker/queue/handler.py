"""The RunPod job handler: answers each job according to the supervisor's state.

ready             → the job is proxied to vLLM (streamed or whole)
failed-permanent  → the startup error: cause and fix, every job, the worker stays up
failed-transient  → the prestart failure with the end of vLLM's output (the worker
                    then exits; see worker.main)
The handler holds no lifecycle flags of its own: it reads the supervisor's state. The
first proxied job's answer (a JSON body) carries ``worker``: what the worker states about
the start (the length vLLM serves, the estimate, the relaunches).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog

from worker.queue import job_check
from worker.queue.jobs import BadInput, to_request
from worker.queue.proxy import VllmProxy
from worker.seams import answers
from worker.supervision.failure import failure_answer
from worker.supervision.machine import WorkerState
from worker.supervision.supervisor import Supervisor

log = structlog.get_logger("worker.handler")


def make_handler(
    supervisor: Supervisor, proxy_factory: Callable[[], VllmProxy], served_model: str
) -> Callable[[dict], AsyncIterator[Any]]:
    proxy: VllmProxy | None = None
    first_job = True  # its answer carries what the worker states about the start

    def with_start_info(item: Any) -> Any:
        stated = getattr(supervisor, "start_info", None)
        info = stated() if stated else {}
        said = info.get("max_model_len") or info.get("estimate") or info.get("relaunches")
        return {**item, "worker": info} if isinstance(item, dict) and said else item

    async def handler(job: dict) -> AsyncIterator[Any]:
        nonlocal proxy, first_job
        job_id = job.get("id")
        unreadable = job_check.answer_for(job)
        if unreadable is not None:  # no input, not an object, or nested too deep to read
            log.info("job.bad_input", job_id=job_id, problem=unreadable)
            yield answers.bad_input(unreadable)
            return
        if supervisor.state is not WorkerState.READY:
            log.info("job.answered_with_failure", job_id=job_id, state=supervisor.state.value)
            yield failure_answer(supervisor)
            return
        try:
            request = to_request(job.get("input"), served_model)
        except BadInput as exc:
            log.info("job.bad_input", job_id=job_id, problem=str(exc))
            yield answers.bad_input(str(exc))
            return
        if proxy is None:
            proxy = proxy_factory()
        log.info(
            "job.proxied",
            job_id=job_id,
            method=request.method,
            path=request.path,
            stream=request.stream,
        )
        tell, first_job = first_job, False
        async for item in proxy.run(request):
            yield with_start_info(item) if tell else item
            tell = False

    return handler
