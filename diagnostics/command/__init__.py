"""The ``diagnose`` command: argument handling (``cli``), text and JSON output
(``render``), scoring against a labelled corpus (``accuracy``).

May import: every ``diagnostics`` package. Imported by: nothing (an entry point).
"""
