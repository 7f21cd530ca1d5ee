"""What the model is, wherever it comes from: its ``config.json`` and files.

Owns: the facts value (``facts``: ``ModelFacts``), the schema every value read passes
(``schema``), which files vLLM would fetch and load (``weight_plan``), reading them from
the Hugging Face hub (``hub``; one bounded GET: ``hub_http``) or from a model folder or
the HF cache (``local``).

May import: ``worker.seams``. Imported by: ``worker.preflight``.
"""
