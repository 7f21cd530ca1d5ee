"""worker.supervision.launch: the command line and environment vLLM is started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.config import baked
from worker.config.settings import load_settings
from worker.supervision.launch import hub_model, vllm_argv, vllm_env

MODEL = {"MODEL_NAME": "org/model"}


@pytest.fixture(autouse=True)
def no_baked_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same whether or not this machine has a /model/baked.json."""
    monkeypatch.setattr(baked, "DEFAULT_MANIFEST", str(tmp_path / "absent.json"))


def test_the_proxys_address_comes_last() -> None:
    settings = load_settings({**MODEL, "VLLM_PORT": "8123", "VLLM_COMMAND": "vllm serve"})
    assert vllm_argv(settings) == [
        "vllm", "serve", "--model", "org/model", "--host", "127.0.0.1", "--port", "8123"
    ]  # fmt: skip


def test_vllm_api_key_never_reaches_vllm() -> None:
    """vLLM would demand the key from the worker's own proxy: every job would get a 401."""
    env = {**MODEL, "VLLM_API_KEY": "sk-local-1234", "HF_TOKEN": "hf_keep"}
    child = vllm_env(load_settings(env), env)
    assert "VLLM_API_KEY" not in child
    assert child["HF_TOKEN"] == "hf_keep"  # vLLM reads it itself


def test_caches_go_on_a_writable_volume(tmp_path: Path) -> None:
    env = {**MODEL, "BASE_PATH": str(tmp_path)}
    child = vllm_env(load_settings(env), env)
    assert child["HF_HOME"] == str(tmp_path / "huggingface-cache")
    assert child["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm-cache")
    assert (child["VLLM_NO_USAGE_STATS"], child["PYTHONUNBUFFERED"]) == ("1", "1")


def test_without_a_volume_the_caches_stay_where_they_are(tmp_path: Path) -> None:
    env = {**MODEL, "BASE_PATH": str(tmp_path / "absent"), "HF_HOME": "/mine"}
    child = vllm_env(load_settings(env), env)
    assert child["HF_HOME"] == "/mine" and "VLLM_CACHE_ROOT" not in child


def test_the_hub_is_asked_only_for_a_model_it_will_serve(tmp_path: Path) -> None:
    env = {**MODEL, "REVISION": "v2"}
    settings = load_settings(env)
    assert hub_model(settings, vllm_env(settings, env)) == ("org/model", "v2")
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    assert hub_model(settings, vllm_env(settings, offline)) is None
    local = {"MODEL_NAME": str(tmp_path)}
    assert hub_model(load_settings(local), local) is None
