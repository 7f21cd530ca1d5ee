"""The memory model: how vLLM will spend a device's memory, calibrated on what it
reported (``fixtures/fit-truth/``, ``docs/preflight.md``).

Owns: a model's architecture facts in the shape vLLM builds layers from (``arch``), the
weights per device (``weight_model``), the KV cache per token and per layer kind
(``kv_layout``), vLLM's defaults by version and engine (``vllm_defaults``), the input
row and its validation (``row_input``), the whole budget (``memory_model``) and what
would fit when it does not (``alternatives``). Pure: no I/O.

May import: nothing else of ``worker``. Imported by: ``worker.preflight`` (its
``estimate`` command-line entry and the start's ``plan``).
"""
