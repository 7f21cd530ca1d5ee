"""Supervising one vLLM start: spawn it, read every line, settle on a state, stop it.

Owns: the supervisor that wires the parts (``supervisor``); the process group
(``vllm_process``, ``launch``: argv and environment; ``parent_death``: children die with
the worker); following a start (``follower``: lines and phases; ``watchdog``: limits;
``health``: vLLM's ``/health``; ``coldstart``: timings); the lifecycle (``machine``,
``transitions``) and what a state change does (``effects``); the answer both modes give
for a failed start (``failure``).

May import: ``worker.config``, ``worker.crashloop``, ``worker.preflight``,
``worker.seams``, ``diagnostics``. Never imports ``worker.queue`` or ``worker.lb``.
Imported by: ``worker.queue``, ``worker.lb``, ``worker.main``.
"""
