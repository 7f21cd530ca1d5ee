"""Pre-flight: predict a failed vLLM start before a download or a GPU is spent.

``run_preflight(settings, env, pack=...)`` returns a ``PreflightResult``: a ``Diagnosis``
(from the rule pack's wording) when the start is sure to fail, else None, plus the
findings and the time it took. Modules, one job each: ``hub`` (metadata from the hub),
``local`` (a model folder or the HF cache), ``request`` (what the arguments ask),
``checks`` (config.json against vLLM's registry and the options), ``fit`` (memory),
``disk``, ``host`` (the RunPod SDK's fitness checks), ``wording`` (prediction to
diagnosis) and ``run`` (the order of it all).
"""

from worker.preflight.run import Finding, PreflightResult, run_preflight

__all__ = ["Finding", "PreflightResult", "run_preflight"]
