"""Reading whole logs fast (the ``diagnose`` command's path on files).

Owns: the whole-log scan (``scan``), the fast
path (``fastpath``) and its parts: the backwards search for the last ready marker
(``readyseek``), block skipping (``skipping``), phase captures before a restart
(``phasecontext``), the block databases (``blockdb``, ``prefilter``) and block cleaning
(``blocktext``).

May import: ``diagnostics.model``, ``diagnostics.pack``, ``diagnostics.classify``,
``diagnostics.attempts``, ``diagnostics.redaction``, ``diagnostics.formats``.
Imported by: ``diagnostics.command``.
"""
