"""Load-balancing mode: the worker serves HTTP itself instead of taking jobs from a queue.

RunPod's load-balancing endpoints send requests straight to a worker's ``PORT`` and
probe its health on ``PORT_HEALTH``. In this mode the same supervisor starts vLLM on
127.0.0.1 and follows it to a settled state; this package owns the public ports:

* ``mode``      which endpoint type this worker serves (``WORKER_MODE``, ``PORT``, ...)
                and the limits on its clients (``LB_*``);
* ``bodies``    every answer the worker gives itself (not ready, the diagnosis, upstream
                errors), built from ``worker.seams.answers`` so both modes say the same;
* ``health``    the health-check status per state and its ASGI app;
* ``proxy``     the ASGI app on ``PORT``: pass-through to vLLM when ready, the request
                body streamed and bounded;
* ``serve``     the run loop: uvicorn servers, signals, drain, exit after a transient
                failure;
* ``guard``     a port's limits shared by its connections, the connections fitted to
                the descriptor limit;
* ``connection``, ``guarded_http``  uvicorn's httptools protocol with the limits of a
                public port: the connection (admission, header deadline, lingering
                close, stop); the request (header size and count, early answers);
* ``health_thread``  the health port's server on a thread and loop of its own.

Its settings' parsers are ``worker.config.lb_parsers``. Nothing here reads ``os.environ``
or starts anything at import.

May import: ``worker.supervision``, ``worker.config``, ``worker.seams``. Never imports
``worker.queue``. Imported by: ``worker.main``.
"""
