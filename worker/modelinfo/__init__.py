"""What the model is, wherever it comes from: its ``config.json`` and files.

Owns: the facts value (``facts``: ``ModelFacts``), reading them from the Hugging Face hub
(``hub``) or from a model folder or the HF cache (``local``).

May import: ``worker.seams``. Imported by: ``worker.preflight``.
"""
