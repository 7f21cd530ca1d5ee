"""The config.json of a Llama-shaped model, as tests hand it to the pre-flight or serve
it from the loopback hub: ``llama_config`` of any size, ``TINY_LLAMA`` (two layers, a
few KiB of weights; what the loopback hub's repos hold), and the real ``LLAMA_8B`` and
``LLAMA_70B`` (Llama 3.1's, bf16) the memory answers are checked on."""

from __future__ import annotations

from typing import Any


def llama_config(*, layers: int, hidden: int, heads: int, kv_heads: int, **more: Any) -> dict:
    """A ``LlamaForCausalLM`` config.json with these sizes, and ``more`` keys."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        **more,
    }


TINY_LLAMA = llama_config(
    layers=2, hidden=128, heads=2, kv_heads=1, max_position_embeddings=2048, torch_dtype="float32"
)
LLAMA_8B = llama_config(
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
    max_position_embeddings=131072,
    torch_dtype="bfloat16",
)
LLAMA_70B = {
    **LLAMA_8B,
    "num_hidden_layers": 80,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
}
