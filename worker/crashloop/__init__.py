"""The crash-loop breaker: how many failed starts in a window, kept across restarts.

Owns: the pure decision (``breaker``), its file ledger and the worker's use of it
(``crash_loop``), where the ledger lives (``ledger_path``).

May import: ``worker.config``, ``diagnostics``. Imported by: ``worker.supervision``.
"""
