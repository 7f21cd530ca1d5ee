"""The incremental classifier: feed lines, ask for a diagnosis.

Owns: the classifier (``classifier``), its phase and traceback tracking (``progress``),
the failure matches kept as evidence (``findings``), lines cut at a terminal's width
(``wrapping``), lines as vLLM wrote them -> matchable text (``normalize``), rendering a
verdict, also by where an exception was raised (``verdict``).

May import: ``diagnostics.model``, ``diagnostics.pack``, ``diagnostics.redaction``.
Imported by: ``diagnostics.attempts``, ``diagnostics.scanning``, ``diagnostics.command``, and
``worker``.
"""
