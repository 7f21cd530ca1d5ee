"""Which files vLLM 0.32 loads and fetches (issue 23 §4), and the schema every value from
a hub or a model folder passes (§1). The rules mirror vLLM's own
(model_loader/default_loader.py ``_prepare_weights``, weight_utils.py
``download_weights_from_hf`` and ``filter_duplicate_safetensors_files``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from worker.modelinfo import local
from worker.modelinfo.facts import ModelFacts
from worker.modelinfo.schema import check_listing, clean_config

GIB = 1 << 30
SHARDS = {
    "model-00001-of-00003.safetensors": 4_949_453_792,
    "model-00002-of-00003.safetensors": 4_999_819_336,
    "model-00003-of-00003.safetensors": 4_546_807_800,
}
MISTRAL_V03 = {  # mistralai/Mistral-7B-Instruct-v0.3: both copies of the weights
    "consolidated.safetensors": 14_496_047_936,
    **SHARDS,
    "model.safetensors.index.json": 23_950,
    "params.json": 202,
    "tokenizer.model.v3": 587_404,
    "tokenizer.model": 587_404,
    "tokenizer.json": 1_961_548,
    "tokenizer_config.json": 140_874,
    "config.json": 601,
    "generation_config.json": 116,
    "special_tokens_map.json": 414,
    "README.md": 7_095,
}
INDEX = {"model.safetensors.index.json": frozenset(SHARDS)}
ONE_COPY = 14_496_047_936


def test_mistral_layout_counts_one_copy_of_the_weights():
    # Before: every *.safetensors was counted, 27 GiB instead of 13.5.
    facts = ModelFacts("hub", files=MISTRAL_V03, indexes=INDEX)
    plan = facts.weight_plan()
    assert plan is not None and plan.load_format == "mistral"  # vLLM's auto choice
    assert plan.loaded == {"consolidated.safetensors": ONE_COPY}
    assert facts.weight_bytes == ONE_COPY
    fetched = facts.download_files()
    assert fetched is not None
    assert sum(s for p, s in fetched.items() if p.endswith(".safetensors")) == ONE_COPY
    assert "README.md" not in fetched and "params.json" in fetched


def test_the_index_names_the_files_loaded_and_fetched():
    files = {k: v for k, v in MISTRAL_V03.items() if not k.startswith("consolidated")}
    files["model.safetensors"] = 14 * GIB  # a stray single-file copy beside the shards
    files["original/model.safetensors"] = 14 * GIB  # vLLM ignores original/
    facts = ModelFacts("hub", files=files, indexes=INDEX)
    plan = facts.weight_plan()
    assert plan is not None and plan.load_format == "hf"
    assert plan.loaded == SHARDS
    assert {p for p in plan.fetched if p.endswith(".safetensors")} == set(SHARDS)
    # An index that could not be read: what vLLM loads is not known, not guessed.
    assert ModelFacts("hub", files=files).weight_plan() is None
    assert ModelFacts("hub", files=files).weight_bytes is None


def test_one_weight_format_is_fetched_not_every_format_in_the_repo():
    # Before: safetensors plus tf, flax, rust, onnx and tflite were counted: 4.73 GiB for
    # a repo whose download is ~0.51 GiB, and a small cache disk got disk-full.
    files = {
        "model.safetensors": int(0.5 * GIB),
        "pytorch_model.bin": int(0.5 * GIB),
        "tf_model.h5": int(0.75 * GIB),
        "flax_model.msgpack": int(0.75 * GIB),
        "rust_model.ot": int(0.75 * GIB),
        "onnx/model.onnx": int(0.75 * GIB),
        "model.tflite": int(0.73 * GIB),
        "config.json": 700,
        "tokenizer.json": 2_000_000,
        "vocab.txt": 200_000,
        "coreml/model.mlpackage/weights.bin": int(0.5 * GIB),
    }
    fetched = ModelFacts("hub", files=files).download_files()
    assert fetched is not None
    assert set(fetched) == {"model.safetensors", "config.json", "tokenizer.json", "vocab.txt"}
    assert sum(fetched.values()) / GIB == pytest.approx(0.502, abs=0.001)
    bins = {k: v for k, v in files.items() if k != "model.safetensors"}
    plan = ModelFacts("hub", files=bins).weight_plan()
    assert plan is not None and set(plan.loaded) == {"pytorch_model.bin"}
    assert ModelFacts("hub", files=files).weight_plan("gguf") is None  # not modelled


def test_a_baked_mistral_folder_counts_one_copy(tmp_path: Path):
    for name, size in MISTRAL_V03.items():
        with open(tmp_path / name, "wb") as handle:
            handle.truncate(size)  # sparse: no disk used
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mistral"}))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {f"w{i}": name for i, name in enumerate(SHARDS)}})
    )
    facts = local.read_folder(tmp_path)
    assert facts is not None and facts.weight_bytes == ONE_COPY
    assert facts.indexes["model.safetensors.index.json"] == frozenset(SHARDS)


def test_a_model_folder_is_read_with_bounds(tmp_path: Path):
    os.mkfifo(tmp_path / "config.json")  # would block a plain read
    facts = local.read_folder(tmp_path)
    assert facts is not None and facts.config is None
    assert any("not a regular file" in p for p in facts.problems)
    (tmp_path / "config.json").unlink()
    (tmp_path / "config.json").write_bytes(b"{" + b" " * (3 << 20) + b"}")
    facts = local.read_folder(tmp_path)
    assert facts is not None and facts.config is None
    assert any("larger than 2 MiB" in p for p in facts.problems)
    (tmp_path / "config.json").write_text('{"max_position_embeddings": NaN}')
    facts = local.read_folder(tmp_path)
    assert facts is not None and facts.config is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_position_embeddings", -5),
        ("max_position_embeddings", math.nan),
        ("max_position_embeddings", math.inf),
        ("max_position_embeddings", "2048"),
        ("max_position_embeddings", [2048]),
        ("max_position_embeddings", True),
        ("max_position_embeddings", 2048.5),
        ("rope_scaling", {"type": "linear", "factor": math.nan}),
        ("rope_scaling", "yes"),
    ],
)
def test_implausible_positions_make_the_length_unknown(key, value):
    from worker.preflight.checks import derived_max_len

    config = {"max_position_embeddings": 4096, "seq_length": 2048, key: value}
    cleaned, problems = clean_config(config)
    assert cleaned is not None and problems and key in problems[0]
    assert derived_max_len(cleaned) is None  # never a smaller, wrong limit


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_key_value_heads", -1),
        ("num_key_value_heads", "8"),
        ("head_dim", math.inf),
        ("num_hidden_layers", 10**12),
        ("sliding_window", "4096"),
    ],
)
def test_an_implausible_layout_value_makes_the_kv_cache_unknown(key, value):
    from worker.preflight.fit import kv_bytes_per_token
    from worker.preflight.request import read_request

    config = {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        key: value,
    }
    cleaned, problems = clean_config(config)
    assert cleaned is not None and problems
    # Not a fallback to num_attention_heads (which would over-count the cache).
    assert kv_bytes_per_token(cleaned, read_request(["--model", "m"], "m")) is None


def test_a_plausible_config_is_kept_as_it_is():
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "torch_dtype": "bfloat16",
        "text_config": {"max_position_embeddings": 8192},
        "custom": {"anything": [1, 2]},
    }
    assert clean_config(config) == (config, [])
    cleaned, problems = clean_config({**config, "text_config": {"num_attention_heads": -2}})
    assert cleaned is not None and "text_config.num_attention_heads" in problems[0]
    assert "num_attention_heads" not in cleaned["text_config"]


@pytest.mark.parametrize(
    "info",
    [
        {"siblings": [{"rfilename": "a", "size": -1}]},
        {"siblings": [{"rfilename": "a", "size": 2**41}]},
        {"siblings": [{"rfilename": None, "size": 1}]},
        {"siblings": [{"rfilename": "a", "size": 1.5}]},
        {"siblings": [{"rfilename": f"f{i}", "size": 1} for i in range(20_001)]},
        {"sha": 123},
        {"safetensors": {"parameters": {"BF16": -1}}},
        {"safetensors": {"parameters": {"BF16": 10**15}}},
        {"siblings": [{"rfilename": f"f{i}", "size": 2**40} for i in range(40)]},
    ],
)
def test_the_listing_schema_rejects_implausible_values(info):
    with pytest.raises(ValueError):
        check_listing(info)


def test_the_listing_schema_accepts_a_real_answer():
    listing = check_listing(
        {
            "sha": "a" * 40,
            "gated": "manual",
            "siblings": [{"rfilename": "model.safetensors", "size": 5, "lfs": {}}],
            "safetensors": {"parameters": {"BF16": 10}, "total": 10},
            "cardData": {"anything": 1},
        }
    )
    assert listing.siblings[0].size == 5 and listing.safetensors is not None
