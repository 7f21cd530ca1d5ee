"""Queue mode: RunPod jobs in, vLLM requests out, vLLM's answers back as job output.

Owns: the RunPod SDK's job intake (``intake``; ``job_fetch``: the job-take request,
its body read whole by ``take_body`` and every element checked by ``job_check``;
``sdk_cpu``: the SDK imported without its CPU probe),
the gate that holds jobs until vLLM settles (``gate``), the handler that answers a job
by state (``handler``), a job -> a request (``jobs``), the request -> vLLM and its
answer -> job output (``proxy``).

May import: ``worker.supervision``, ``worker.config``, ``worker.seams``. Never imports
``worker.lb``. Imported by: ``worker.main`` (and ``worker/__init__`` for ``sdk_cpu``).
"""
