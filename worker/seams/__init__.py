"""The seams every part uses: the edges of the process, one module each.

Owns: the one HTTP session to vLLM and its errors -> answers (``upstream``), the shapes
of the answers both modes give (``answers``), NVML and host memory (``gpus``), structlog
set-up (``logs``), the HF cache on disk (``downloads``).

May import: ``diagnostics`` (the secret rule). Never imports another ``worker`` package.
Imported by: every other ``worker`` package.
"""
