"""Baking a model into an image: ``worker.image.bake`` against the loopback hub, then the worker
serving the baked copy on real vLLM with the Hub unreachable.

The fast tests use a hand-made repo (weights in several formats, so skipping can be
seen); the vLLM test bakes the real tiny model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hub_server import (
    GATED_REPO,
    MISSING_REPO,
    OK_REPO,
    HubServer,
    write_repo,
)
from tests.support.queue_server import QueueServer
from tests.support.vllm_env import (
    QUIET_ENV,
    ROOT,
    build_tiny_model,
    events,
    group_alive,
    needs_vllm,
    start_worker,
    worker_env,
)
from worker.config.baked import BakedModel, read_baked_model
from worker.config.settings import load_settings
from worker.image.bake import bake
from worker.image.credentials import read_token
from worker.image.download_plan import skipped_weights
from worker.image.errors import BakeError

OK, GATED, MISSING = OK_REPO, GATED_REPO, MISSING_REPO
TOKENIZER = "tiny-org/tokenizer-only"
SECRET = "hf_not_a_real_token_0123456789"


pytestmark = pytest.mark.usefixtures("hub_reachable")


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files: dict[str, str | bytes] = {
        "config.json": '{"model_type": "llama"}\n',
        "tokenizer.json": '{"version": "1.0"}\n',
        "model.safetensors": bytes(range(256)) * 64,
        "pytorch_model.bin": b"\0" * 4096,
        "original/consolidated.00.pth": b"\1" * 4096,
    }
    return write_repo(tmp_path_factory.mktemp("repo"), files)


@pytest.fixture(scope="module")
def hub(repo_dir: Path) -> Iterator[HubServer]:
    repos = {OK: repo_dir, GATED: repo_dir, TOKENIZER: repo_dir}
    with HubServer(repos, gated={GATED}) as server:
        yield server


def _files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".cache" not in p.parts
    }


def test_bake_writes_the_manifest_the_worker_reads(hub: HubServer, tmp_path: Path) -> None:
    manifest = bake(OK, tmp_path / "image", endpoint=hub.url)

    assert manifest == tmp_path / "image" / "baked.json"
    data = json.loads(manifest.read_text())
    model_dir = tmp_path / "image" / "model"
    assert data["model_name"] == OK and data["model_path"] == str(model_dir)
    assert data["tokenizer_path"] is None
    assert data["commit"] == hub.commit(OK)
    assert read_baked_model({"BAKED_MODEL_MANIFEST": str(manifest)}) == BakedModel(
        str(model_dir), None, OK
    )
    # vLLM loads safetensors first: the other weight formats are not downloaded.
    assert _files(model_dir) == {"config.json", "tokenizer.json", "model.safetensors"}


def test_the_baked_model_is_served_offline_under_its_hub_name(
    hub: HubServer, tmp_path: Path
) -> None:
    manifest = bake(OK, tmp_path, endpoint=hub.url)
    settings = load_settings({"BAKED_MODEL_MANIFEST": str(manifest), "MODEL_NAME": OK})
    assert settings.model == str(tmp_path / "model")
    assert settings.served_model_name == OK
    assert settings.offline and settings.warnings == []


def test_a_separate_tokenizer_is_baked_without_weights(hub: HubServer, tmp_path: Path) -> None:
    manifest = bake(OK, tmp_path, tokenizer=TOKENIZER, endpoint=hub.url)
    data = json.loads(manifest.read_text())
    assert data["tokenizer_path"] == str(tmp_path / "tokenizer")
    assert data["tokenizer_name"] == TOKENIZER
    assert _files(tmp_path / "tokenizer") == {"config.json", "tokenizer.json"}
    assert read_baked_model({"BAKED_MODEL_MANIFEST": str(manifest)}).tokenizer_path == str(
        tmp_path / "tokenizer"
    )


def test_the_model_repo_as_tokenizer_is_not_downloaded_twice(
    hub: HubServer, tmp_path: Path
) -> None:
    manifest = bake(OK, tmp_path, tokenizer=OK, endpoint=hub.url)
    assert json.loads(manifest.read_text())["tokenizer_path"] is None
    assert not (tmp_path / "tokenizer").exists()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"model": GATED},
            f"{GATED} is a gated model and no token was given: set the HF_TOKEN secret",
        ),
        (
            {"model": GATED, "token": SECRET},
            f"{GATED} is a gated model and the HF_TOKEN secret has no access to it",
        ),
        ({"model": MISSING}, f"repo {MISSING} was not found on "),
        ({"model": OK, "revision": "v9"}, f"{OK} has no revision 'v9': set MODEL_REVISION"),
        ({"model": OK, "tokenizer": MISSING}, "check TOKENIZER_NAME"),
        ({"model": "not a//repo id"}, "MODEL_NAME='not a//repo id' is not a Hugging Face repo"),
        ({"model": " "}, "MODEL_NAME is empty"),
    ],
)
def test_failures_are_one_line_naming_repo_and_fix(
    hub: HubServer, tmp_path: Path, kwargs: dict, expected: str
) -> None:
    with pytest.raises(BakeError) as err:
        bake(target=tmp_path, endpoint=hub.url, **kwargs)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message and SECRET not in message
    assert not (tmp_path / "baked.json").exists()


def test_missing_repo_error_names_the_variable(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(BakeError, match=r"check MODEL_NAME \(a private repo also needs"):
        bake(MISSING, tmp_path, endpoint=hub.url)


def test_unreachable_hub(tmp_path: Path) -> None:
    with pytest.raises(BakeError, match=f"cannot download {OK} from http://127.0.0.1:9: "):
        bake(OK, tmp_path, endpoint="http://127.0.0.1:9")


def test_token_comes_from_the_env_then_the_secret_file(tmp_path: Path) -> None:
    secret = tmp_path / "HF_TOKEN"
    assert read_token({}, secret) is None
    secret.write_text(f"  {SECRET}\n")
    assert read_token({}, secret) == SECRET
    assert read_token({"HF_TOKEN": "from-env"}, secret) == "from-env"
    assert read_token({"HF_TOKEN": " "}, secret) == SECRET


def test_other_weight_formats_are_skipped_only_beside_safetensors() -> None:
    assert skipped_weights(["pytorch_model.bin", "config.json"]) == []
    assert skipped_weights(["model.gguf"]) == []
    assert skipped_weights(
        ["model.safetensors", "pytorch_model.bin", "original/consolidated.00.pth", "x.json"]
    ) == ["*.bin", "*.pth"]


def _cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    clean.update(QUIET_ENV, HF_HOME=str(tmp_path / "hf-home"), **env)
    return subprocess.run(
        [sys.executable, "-m", "worker.image.bake", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_shows_progress_and_writes_the_manifest(hub: HubServer, tmp_path: Path) -> None:
    result = _cli(
        ["--target", str(tmp_path / "model")], tmp_path, MODEL_NAME=OK, HF_ENDPOINT=hub.url
    )
    assert result.returncode == 0, result.stderr
    assert f"bake: downloading {OK}@main (commit {hub.commit(OK)}" in result.stderr
    assert "skipping other weight formats: *.bin, *.pth" in result.stderr
    assert f"bake: wrote {tmp_path / 'model' / 'baked.json'}" in result.stderr


def test_cli_gated_error_is_one_line_exit_1_and_never_shows_the_token(
    hub: HubServer, tmp_path: Path
) -> None:
    result = _cli(
        ["--model", GATED, "--target", str(tmp_path)],
        tmp_path,
        HF_ENDPOINT=hub.url,
        HF_TOKEN=SECRET,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("bake: error")]
    assert errors == [
        f"bake: error: {GATED} is a gated model and the HF_TOKEN secret has no access to it: "
        f"accept the model's terms on {hub.url}/{GATED} with the token's account, or set "
        "the HF_TOKEN secret to a token that has access"
    ]
    assert SECRET not in result.stdout + result.stderr


# -- real vLLM: the worker serves the baked copy with the Hub unreachable


@needs_vllm
@pytest.mark.vllm
def test_worker_serves_the_baked_model_offline_under_its_hub_name(tmp_path: Path) -> None:
    tiny = build_tiny_model(tmp_path / "tiny")
    with HubServer({OK: tiny}) as hub:
        manifest = bake(OK, tmp_path / "image", endpoint=hub.url)
    model_dir = tmp_path / "image" / "model"

    with QueueServer() as queue:
        job = queue.submit({"openai_route": "/v1/models"})
        env = worker_env(
            tmp_path,
            MODEL_NAME=OK,
            BAKED_MODEL_MANIFEST=str(manifest),
            HF_ENDPOINT="http://127.0.0.1:9",  # closed: any Hub call would fail
            **queue.env(),
        )
        del env["HF_HUB_OFFLINE"]  # the worker must set it for vLLM itself
        proc = start_worker(env, tmp_path)
        try:
            done = queue.wait_done(job, timeout=300)
            assert [m["id"] for m in done["output"][0]["data"]] == [OK]

            spawned = next(e for e in events(tmp_path) if e.get("event") == "vllm.spawned")
            vllm_env = Path(f"/proc/{spawned['pid']}/environ").read_bytes().split(b"\0")
            assert b"HF_HUB_OFFLINE=1" in vllm_env
            command = next(e for e in events(tmp_path) if e.get("event") == "vllm.spawning")
            assert f"--model {model_dir}" in command["command"]
            assert not [e for e in events(tmp_path) if e.get("event") == "worker.config_warning"]

            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(60) == 0
            assert not group_alive(spawned["pid"])
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
