"""Supervising one vLLM start: spawn it, read every line, settle on a state, stop it.

Owns: the supervisor that wires the parts (``supervisor``); the vLLM processes of one
start, one after another, relaunches included (``restarts``); the process group
(``vllm_process``, with the children that die with the worker; ``launch``: argv and
environment); following a start (``follower``: lines and phases; ``watchdog``: limits;
``health``: vLLM's ``/health``; ``coldstart``: timings); the lifecycle (``machine``,
``transitions``) and what a state change does (``effects``); the answer both modes give
for a failed start and a configuration judged bad before launch (``failure``); whether
to relaunch with what vLLM measured, and the changed arguments (``relaunch``,
``relaunch_apply``).

May import: ``worker.config``, ``worker.crashloop``, ``worker.preflight``,
``worker.seams``, ``diagnostics``. Never imports ``worker.queue`` or ``worker.lb``.
Imported by: ``worker.queue``, ``worker.lb``, ``worker.main``.
"""
