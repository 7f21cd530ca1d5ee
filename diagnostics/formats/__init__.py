"""A log's bytes as they come, turned into vLLM's lines (the ``diagnose`` command's and
the worker's readers).

Owns: bytes -> lines, encodings and line ends, a container runtime's JSON records and
collectors' exports (``streams``); what a paste did to the text, undone: a screenshot's
OCR, HTML escaping (``pastes``); which way a log runs, an export listed newest first
(``order``).

May import: ``diagnostics.classify``, ``diagnostics.redaction``. Imported by:
``diagnostics.scanning``, ``diagnostics.command``, ``worker``.
"""
