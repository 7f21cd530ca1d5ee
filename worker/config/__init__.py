"""The worker's settings and the ``vllm serve`` arguments they become.

Owns: the one table of the worker's variables (``settings``: ``SETTINGS``, ``Settings``)
and their parsers (``parsers``, ``lb_parsers``); environment -> ``vllm serve`` argv from
the snapshot of vLLM's own parser (``flags``, ``snapshot``, ``flag_values``,
``vllm_flags.json``); ``VLLM_EXTRA_ARGS`` (``extra_args``), ``VLLM_CONFIG_FILE``
(``config_file``), the flags the worker owns (``owned``), a model baked into the image
(``baked``), ``ConfigError`` (``errors``).

May import: ``diagnostics`` (the secret rule). Never imports another ``worker`` package.
Imported by: every other ``worker`` package and ``worker.main``.
"""
