"""Several attempts in one log: which attempt's failure is the verdict.

Owns: the last attempt's verdict and the runs a platform ended (``last``), which
failures name a cause of their own and which a failed step above vLLM's start left in
the model's files (``decisive``), and a whole log held as lines classified with them
(``lines``: ``classify_lines``).

May import: ``diagnostics.model``, ``diagnostics.pack``, ``diagnostics.classify``,
``diagnostics.redaction``. Imported by: ``diagnostics.scanning``,
``diagnostics.command``, the package's re-exports, and ``worker``.
"""
