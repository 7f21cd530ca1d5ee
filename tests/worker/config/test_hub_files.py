"""The RunPod Hub files (.runpod/hub.json, .runpod/tests.json) match what the worker reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.vllm_env import ROOT
from worker.config import baked
from worker.config import flags as flagmod
from worker.config.settings import WORKER_ENV, load_settings
from worker.queue.jobs import to_request

HUB = json.loads((ROOT / ".runpod" / "hub.json").read_text(encoding="utf-8"))
TESTS = json.loads((ROOT / ".runpod" / "tests.json").read_text(encoding="utf-8"))
ENV = HUB["config"]["env"]
KNOWN = WORKER_ENV | set(flagmod.ALIASES) | set(flagmod.load_flags().by_env)


@pytest.fixture(autouse=True)
def _no_baked_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The Hub deploys the plain image: no /model/baked.json, whatever this machine has.
    monkeypatch.setattr(baked, "DEFAULT_MANIFEST", str(tmp_path / "absent.json"))


def _as_env(value: Any, spec: dict[str, Any]) -> str:
    """The string the Hub puts in the environment for an input's value."""
    if spec["type"] == "boolean":
        return spec["trueValue"] if value else spec["falseValue"]
    return str(value)


def _defaults() -> dict[str, str]:
    return {
        entry["key"]: _as_env(entry["input"]["default"], entry["input"])
        for entry in ENV
        if entry["input"]["default"] not in ("", None)
    }


def test_top_level_follows_the_hub_conventions() -> None:
    assert HUB["type"] == "serverless" and HUB["category"] == "language"
    assert HUB["title"] and HUB["description"]
    assert HUB["iconUrl"].startswith("https://")
    config = HUB["config"]
    assert config["runsOn"] == "GPU"
    assert isinstance(config["containerDiskInGb"], int) and config["containerDiskInGb"] > 0


@pytest.mark.parametrize("entry", ENV, ids=[e["key"] for e in ENV])
def test_every_env_key_is_one_the_worker_knows(entry: dict[str, Any]) -> None:
    assert entry["key"] in KNOWN, f"{entry['key']} is not a worker setting, alias or vLLM flag"


@pytest.mark.parametrize("entry", ENV, ids=[e["key"] for e in ENV])
def test_every_input_is_well_formed(entry: dict[str, Any]) -> None:
    spec = entry["input"]
    assert spec["name"] and spec["description"]
    assert spec["type"] in ("string", "number", "boolean")
    if spec["type"] == "boolean":
        assert isinstance(spec["default"], bool)
        assert {spec["trueValue"], spec["falseValue"]} == {"true", "false"}
    elif spec["type"] == "number":
        assert isinstance(spec["default"], int | float) and not isinstance(spec["default"], bool)
    else:
        assert isinstance(spec["default"], str)
    if "options" in spec:
        values = [option["value"] for option in spec["options"]]
        assert all(option["label"] for option in spec["options"])
        assert spec["default"] in values


def test_env_keys_are_unique() -> None:
    keys = [entry["key"] for entry in ENV]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    "preset", HUB["config"]["presets"], ids=[p["name"] for p in HUB["config"]["presets"]]
)
def test_presets_set_listed_keys_and_start_cleanly(preset: dict[str, Any]) -> None:
    listed = {entry["key"] for entry in ENV}
    assert set(preset["defaults"]) <= listed
    assert all(isinstance(v, str) for v in preset["defaults"].values())
    settings = load_settings({**_defaults(), **preset["defaults"]})
    assert settings.warnings == []
    assert settings.model == preset["defaults"].get("MODEL_NAME", _defaults()["MODEL_NAME"])


def test_the_defaults_start_cleanly() -> None:
    settings = load_settings(_defaults())
    assert settings.warnings == []
    assert "--max-model-len" not in settings.vllm_args  # empty: the model's own limit


def test_hub_test_cases_are_chat_requests_the_worker_accepts() -> None:
    assert TESTS["tests"]
    for case in TESTS["tests"]:
        assert case["name"] and isinstance(case["timeout"], int) and case["timeout"] > 0
        request = to_request(case["input"], "served")
        assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    env = {item["key"]: item["value"] for item in TESTS["config"]["env"]}
    assert set(env) <= KNOWN
    assert load_settings(env).warnings == []
