"""Pre-flight: predict a failed vLLM start before a download or a GPU is spent.

``run_preflight(settings, env, pack=...)`` returns a ``PreflightResult``: a ``Diagnosis``
(from the rule pack's wording) when the start is sure to fail, else None, plus the
findings and the time it took. Modules, one job each: ``request`` (what the arguments ask),
``checks`` (config.json against vLLM's registry and the options), ``fit`` (memory),
``disk``, ``host`` (the RunPod SDK's fitness checks), ``wording`` (prediction to
diagnosis; a hub's refusal, a failed host, a wedged NVML), ``registry`` (the snapshot of
vLLM's model registry) and ``run`` (the order of it all), ``plan`` (the numbers the
worker states at each start) and ``estimate`` (the memory model's command line:
``python -m worker.preflight.estimate``). What the model is comes from
``worker.modelinfo``; how its memory is spent from ``worker.memory``.

May import: ``worker.config``, ``worker.memory``, ``worker.modelinfo``, ``worker.seams``,
``diagnostics``.
Never imports ``worker.supervision``, ``worker.queue`` or ``worker.lb``. Imported by:
``worker.supervision``, ``worker.main``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.preflight.run import Finding, PreflightResult, run_preflight

__all__ = ["Finding", "PreflightResult", "run_preflight"]


def __getattr__(name: str) -> Any:
    # Lazy: ``python -m worker.preflight.estimate`` imports this package first, and
    # must neither pay for the checks' imports nor find itself imported by them.
    if name in __all__:
        from worker.preflight import run

        return getattr(run, name)
    raise AttributeError(name)
