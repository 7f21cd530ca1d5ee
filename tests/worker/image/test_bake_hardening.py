"""Issue 23 §1 and §4 for the bake step: the endpoint's credentials and the token never
appear in what bake prints, and a Mistral-layout repo is baked with one copy of its
weights (the one vLLM loads). Against the loopback hub (tests/support/hub_server.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from tests.support.hub_server import Hostile, HubServer, write_repo
from worker.image.bake import bake
from worker.image.credentials import public_endpoint, read_endpoint
from worker.image.download_plan import duplicate_weights
from worker.image.errors import BakeError

TOKEN = "hf_" + "Kp4" * 11
PASSWORD = "pw-" + "Rt8" * 6
MISTRAL = "mistralai/Mistral-7B-Instruct-v0.3"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]

pytestmark = pytest.mark.usefixtures("hub_reachable")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    root = tmp_path_factory.mktemp("repos")
    mistral = write_repo(
        root / "mistral",
        {
            "config.json": '{"model_type": "mistral"}',
            "params.json": "{}",
            "tokenizer.model.v3": b"\0" * 64,
            "consolidated.safetensors": b"\1" * 2048,
            **{name: b"\2" * 1024 for name in SHARDS},
            "model.safetensors.index.json": json.dumps(
                {"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}
            ),
        },
    )
    echo = write_repo(root / "echo", {"config.json": "{}"})
    repos = {MISTRAL: mistral, "org/echo": echo}
    with HubServer(repos, hostile={"org/echo": Hostile(echo_token=True)}) as server:
        yield server


def test_a_mistral_layout_is_baked_with_the_copy_vllm_loads(hub, tmp_path):
    # Before: both copies were downloaded (twice the weights in the image).
    said: list[str] = []
    bake(MISTRAL, tmp_path, endpoint=hub.url, say=said.append)
    files = {p.name for p in (tmp_path / "model").iterdir() if p.is_file()}
    assert "consolidated.safetensors" in files and "params.json" in files
    assert not files & {*SHARDS, "model.safetensors.index.json"}
    assert any("skipping the copy vLLM does not load" in line for line in said)


def test_duplicate_weights_follow_vllms_automatic_format():
    assert duplicate_weights(["model.safetensors", "config.json"]) == []
    assert duplicate_weights(
        ["consolidated.safetensors", *SHARDS, "model.safetensors.index.json", "x/y.safetensors"]
    ) == sorted([*SHARDS, "model.safetensors.index.json"])


def test_credentials_in_hf_endpoint_never_reach_the_error_line(tmp_path):
    # Before: "cannot download ... from http://mirror-user:pw-...@127.0.0.1:9: ..."
    endpoint = f"http://mirror-user:{PASSWORD}@127.0.0.1:9"
    with pytest.raises(BakeError) as err:
        bake("org/any", tmp_path, endpoint=endpoint, token=TOKEN)
    message = str(err.value)
    assert "cannot download org/any from http://127.0.0.1:9" in message
    assert PASSWORD not in message and "mirror-user:" not in message


def test_a_hub_echoing_the_token_and_credentials_is_hidden(hub, tmp_path):
    host = hub.url.removeprefix("http://")
    endpoint = f"http://mirror-user:{PASSWORD}@{host}"
    lines: list[str] = []
    with pytest.raises(BakeError) as err:
        bake("org/echo", tmp_path, endpoint=endpoint, token=TOKEN, say=lines.append)
    shown = str(err.value) + "\n".join(lines)
    basic = base64.b64encode(f"mirror-user:{PASSWORD}".encode()).decode()
    assert "Access denied" in shown or "403" in shown
    for secret in (TOKEN, PASSWORD, basic):
        assert secret not in shown


def test_the_endpoint_comes_from_the_env_then_the_build_secret(tmp_path):
    secret = tmp_path / "HF_ENDPOINT"
    assert read_endpoint({}, secret) is None
    secret.write_text(f" http://u:{PASSWORD}@mirror.example \n")
    assert read_endpoint({}, secret) == f"http://u:{PASSWORD}@mirror.example"
    assert read_endpoint({"HF_ENDPOINT": "http://env.example"}, secret) == "http://env.example"
    assert public_endpoint(f"http://u:{PASSWORD}@mirror.example/x") == ("http://mirror.example/x")
