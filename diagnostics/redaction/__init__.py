"""Secrets: what a secret is (``secrets``, the one rule) and taking them out of text
(``redact``).

May import: nothing else of ``diagnostics``. Imported by: every other part of
``diagnostics`` and ``worker`` that repeats text it did not write.
"""
