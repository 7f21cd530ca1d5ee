"""Build a tiny random Llama model directory that real vLLM (CPU build) can serve.

This module owns the on-disk test model: config, float32 safetensors weights, a small
byte-level BPE tokenizer and a chat template, plus broken variants used to provoke
vLLM's startup errors. It needs ``numpy``, ``safetensors``, ``tokenizers`` and
``transformers``, which only exist in the vLLM venv, so those are imported inside
:func:`build`; importing this module from the worker's own venv is safe. Tests there run
it as a subprocess::

    .venv-vllm/bin/python -m tests.support.tiny_model OUTDIR [--variant ok]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Config variants patch config.json; weight variants change one tensor of the checkpoint:
# one vLLM's Llama has no parameter for, or one of the wrong shape.
VARIANTS = ("ok", "unsupported-arch", "custom-code", "extra-weight", "wrong-shape")
WEIGHT_VARIANTS = ("extra-weight", "wrong-shape")

SEED = 1234
VOCAB_SIZE = 350
HIDDEN = 128
INTERMEDIATE = 256
LAYERS = 2
HEADS = 2
KV_HEADS = 1
MAX_POSITIONS = 2048

# The tiny model's config.json as a hub describes it (the fields the pre-flight reads), for
# tests and benches that serve a description of the model rather than the model itself.
HUB_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "dtype": "float32",
    "head_dim": HIDDEN // HEADS,
    "hidden_size": HIDDEN,
    "max_position_embeddings": MAX_POSITIONS,
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "num_key_value_heads": KV_HEADS,
    "vocab_size": VOCAB_SIZE,
}

# A few sentences are enough for a byte-level BPE to reach ~350 tokens.
_CORPUS = [
    "Hello, world! This is a tiny model used to test a vLLM worker.",
    "The quick brown fox jumps over the lazy dog.",
    "RunPod Serverless starts a worker that supervises vLLM and proxies requests.",
    "User: what is the capital of France? Assistant: Paris is the capital of France.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation . , ; : ! ? ( ) [ ] { } < > / \\ - _",
    "System prompts, user turns and assistant replies are joined by a chat template.",
]

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_CUSTOM_MODEL_TYPE = "frob_llama"
_CUSTOM_CODE = '''"""Custom config of the tiny test model: vLLM demands trust_remote_code."""
from transformers import LlamaConfig


class FrobLlamaConfig(LlamaConfig):
    model_type = "frob_llama"
'''


def _build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<unk>", "<s>", "</s>", "<pad>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _patch_config(outdir: Path, variant: str) -> None:
    path = outdir / "config.json"
    cfg = json.loads(path.read_text())
    if variant == "unsupported-arch":
        cfg["architectures"] = ["FrobForCausalLM"]
    elif variant == "custom-code":
        cfg["model_type"] = _CUSTOM_MODEL_TYPE
        cfg["auto_map"] = {"AutoConfig": "configuration_frob.FrobLlamaConfig"}
        (outdir / "configuration_frob.py").write_text(_CUSTOM_CODE)
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _config(tokenizer) -> dict:
    """The ``config.json`` that ``LlamaConfig(...).save_pretrained`` would write.

    Written by hand because importing ``LlamaConfig``/``LlamaForCausalLM`` pulls in most of
    torch and costs ~9 s on two cores; the whole build then takes ~2 s.
    """
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tokenizer.bos_token_id,
        "dtype": "float32",
        "eos_token_id": tokenizer.eos_token_id,
        "head_dim": HIDDEN // HEADS,  # 64: a size the CPU attention kernels support
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "pad_token_id": tokenizer.pad_token_id,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": len(tokenizer),
    }


def _weights(vocab: int, variant: str = "ok") -> dict:  # -> dict[str, numpy.ndarray]
    """Random LlamaForCausalLM weights (normal(0, 0.02), norms at 1), fixed seed; the
    weight variants add a tensor Llama does not have, or halve the final norm."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    head_dim = HIDDEN // HEADS
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab, HIDDEN),
        "lm_head.weight": (vocab, HIDDEN),
        "model.norm.weight": (HIDDEN,),
    }
    for i in range(LAYERS):
        pre = f"model.layers.{i}."
        shapes |= {
            pre + "input_layernorm.weight": (HIDDEN,),
            pre + "post_attention_layernorm.weight": (HIDDEN,),
            pre + "self_attn.q_proj.weight": (HEADS * head_dim, HIDDEN),
            pre + "self_attn.k_proj.weight": (KV_HEADS * head_dim, HIDDEN),
            pre + "self_attn.v_proj.weight": (KV_HEADS * head_dim, HIDDEN),
            pre + "self_attn.o_proj.weight": (HIDDEN, HEADS * head_dim),
            pre + "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN),
            pre + "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
            pre + "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE),
        }
    if variant == "extra-weight":
        shapes["model.layers.0.mlp.frob_proj.weight"] = (HIDDEN, HIDDEN)
    elif variant == "wrong-shape":
        shapes["model.norm.weight"] = (HIDDEN // 2,)
    return {
        name: (
            np.ones(shape, dtype=np.float32)
            if name.endswith("norm.weight")
            else rng.normal(0.0, 0.02, size=shape).astype(np.float32)
        )
        for name, shape in sorted(shapes.items())
    }


def build(outdir: str | Path, variant: str = "ok") -> Path:
    """Write the tiny model (``variant`` from :data:`VARIANTS`) into ``outdir``; return it."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    from safetensors.numpy import save_file

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer()
    tokenizer.save_pretrained(out)
    config = _config(tokenizer)
    weights = _weights(config["vocab_size"], variant)
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    generation = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if variant != "ok" and variant not in WEIGHT_VARIANTS:
        _patch_config(out, variant)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--variant", choices=VARIANTS, default="ok")
    args = parser.parse_args(argv)
    print(build(args.outdir, args.variant))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
