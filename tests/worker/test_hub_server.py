"""The fake hub behaves like huggingface.co for the real huggingface_hub client.

Fast and vLLM-free: repos are small directories made in ``tmp_path``; every download goes to
a per-test cache through ``endpoint=`` (huggingface_hub reads ``HF_ENDPOINT`` at import).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.support.hub_server import (
    GATED_REPO,
    MISSING_REPO,
    OK_REPO,
    HubServer,
    write_repo,
)

OK, GATED, MISSING = OK_REPO, GATED_REPO, MISSING_REPO
NOT_A_TOKEN = "not-a-real-token"


pytestmark = pytest.mark.usefixtures("hub_reachable")


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files: dict[str, str | bytes] = {
        "config.json": '{"model_type": "llama"}\n',
        "model.safetensors": bytes(range(256)) * 160,  # 40 KiB, "LFS"
        "sub/notes.txt": "nested file\n",
    }
    return write_repo(tmp_path_factory.mktemp("repo"), files)


@pytest.fixture(scope="module")
def hub(repo_dir: Path) -> Iterator[HubServer]:
    with HubServer({OK: repo_dir, GATED: repo_dir}, gated={GATED}) as server:
        yield server


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_snapshot_download_gets_every_file(hub: HubServer, repo_dir: Path, tmp_path: Path) -> None:
    path = snapshot_download(OK, cache_dir=tmp_path, endpoint=hub.url, token=False)
    assert Path(path).name == hub.commit(OK)
    assert _files(Path(path)) == _files(repo_dir)


def test_hf_hub_download_resolves_main_to_the_commit(hub: HubServer, tmp_path: Path) -> None:
    path = hf_hub_download(OK, "config.json", cache_dir=tmp_path, endpoint=hub.url, token=False)
    assert Path(path).parent.name == hub.commit(OK)
    assert (tmp_path / f"models--{OK.replace('/', '--')}" / "refs" / "main").read_text() == (
        hub.commit(OK)
    )


def test_gated_repo_raises_gated_repo_error(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(GatedRepoError) as err:
        snapshot_download(GATED, cache_dir=tmp_path, endpoint=hub.url, token=False)
    assert err.value.response.status_code == 401
    assert f"Access to model {GATED} is restricted" in str(err.value)


def test_gated_repo_with_a_token_is_forbidden(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(GatedRepoError) as err:
        hf_hub_download(
            GATED, "config.json", cache_dir=tmp_path, endpoint=hub.url, token=NOT_A_TOKEN
        )
    assert err.value.response.status_code == 403


def test_missing_repo_raises_repository_not_found(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFoundError) as err:
        snapshot_download(MISSING, cache_dir=tmp_path, endpoint=hub.url, token=False)
    assert err.value.response.status_code == 401
    assert err.value.response.headers["X-Error-Code"] == "RepoNotFound"


def test_missing_file_and_revision(hub: HubServer, tmp_path: Path) -> None:
    kwargs = {"cache_dir": tmp_path, "endpoint": hub.url, "token": False}
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(OK, "nope.json", **kwargs)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(OK, "config.json", revision="v9", **kwargs)


def test_resolve_headers_and_range(hub: HubServer, repo_dir: Path) -> None:
    url = f"{hub.url}/{OK}/resolve/main/model.safetensors"
    data = (repo_dir / "model.safetensors").read_bytes()
    head = httpx.head(url)
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == hub.commit(OK)
    assert head.headers["X-Linked-Size"] == head.headers["Content-Length"] == str(len(data))
    assert head.headers["X-Linked-Etag"] == head.headers["ETag"]
    part = httpx.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206
    assert part.content == data[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{len(data)}"


def test_throttle_paces_matching_files(repo_dir: Path) -> None:
    size = (repo_dir / "model.safetensors").stat().st_size
    bps = size * 4  # a quarter of a second for the weights, unthrottled for the rest
    with HubServer({OK: repo_dir}, throttle_bps=bps, throttle_glob="*.safetensors") as hub:
        t0 = time.monotonic()
        body = httpx.get(f"{hub.url}/{OK}/resolve/main/model.safetensors").content
        elapsed = time.monotonic() - t0
    assert len(body) == size
    assert elapsed >= 0.2
    assert [(r.method, r.status) for r in hub.requests] == [("GET", 200)]


def test_requests_are_recorded(hub: HubServer) -> None:
    before = len(hub.requests)
    httpx.get(f"{hub.url}/api/models/{OK}/revision/main")
    assert hub.requests[before:][0].path == f"/api/models/{OK}/revision/main"
