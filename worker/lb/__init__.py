"""Load-balancing mode: the worker serves HTTP itself instead of taking jobs from a queue.

RunPod's load-balancing endpoints send requests straight to a worker's ``PORT`` and
probe its health on ``PORT_HEALTH``. In this mode the same supervisor starts vLLM on
127.0.0.1 and follows it to a settled state; this package owns the public ports:

* ``mode``      which endpoint type this worker serves (``WORKER_MODE``, ``PORT``, ...);
* ``parsers``   parsers for those settings (referenced by ``worker.settings``' table);
* ``bodies``    every answer the worker gives itself (not ready, the diagnosis, upstream
                errors), built from ``worker.answers`` so both modes say the same;
* ``health``    the health-check status per state and its ASGI app;
* ``proxy``     the ASGI app on ``PORT``: pass-through to vLLM when ready;
* ``serve``     the run loop: uvicorn servers, signals, drain, exit after a transient
                failure.

Nothing here reads ``os.environ`` or starts anything at import.
"""
