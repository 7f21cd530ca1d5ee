"""worker.seams.downloads: the HF cache watch on a real folder laid out as huggingface_hub lays
it out (blobs/*.incomplete while downloading), and the hub's total size from the fake hub."""

from __future__ import annotations

from pathlib import Path

from tests.support.hub_server import HubServer
from worker.modelinfo.hub import download_bytes
from worker.seams.downloads import DownloadWatch, hf_cache_dir


def _blob(cache: Path, name: str, size: int) -> Path:
    blobs = cache / "models--org--m" / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    path = blobs / name
    path.write_bytes(b"\0" * size)
    return path


def test_the_cache_folder_follows_huggingface_hubs_variables(tmp_path) -> None:
    assert hf_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hf_cache_dir({"HF_HOME": "/h"}) == Path("/h/hub")
    assert hf_cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_growing_incomplete_blobs_are_a_download_in_progress(tmp_path) -> None:
    watch = DownloadWatch(tmp_path, total_bytes=10_000)
    assert not watch.sample(0.0).active  # empty or missing cache
    partial = _blob(tmp_path, "abc.incomplete", 1000)
    first = watch.sample(1.0)
    assert first.active and first.bytes_done == 1000 and first.total_bytes == 10_000
    partial.write_bytes(b"\0" * 3000)
    second = watch.sample(2.0)
    assert second.active and second.rate_bps == 2000.0
    assert not watch.sample(3.0).active  # no growth since the last sample


def test_complete_blobs_count_but_are_no_download(tmp_path) -> None:
    _blob(tmp_path, "done", 500)
    progress = DownloadWatch(tmp_path).sample(1.0)
    assert (progress.bytes_done, progress.active) == (500, False)


def test_the_total_comes_from_the_hubs_metadata(tmp_path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (model / "model.safetensors").write_bytes(b"\0" * 4096)
    expected = 4096 + len('{"architectures": ["LlamaForCausalLM"]}')
    with HubServer({"org/tiny": model}) as hub:
        assert download_bytes("org/tiny", None, hub.url, None) == expected
        assert download_bytes("org/missing", None, hub.url, None) is None


def test_an_unreachable_hub_means_unknown() -> None:
    assert download_bytes("org/m", None, "http://127.0.0.1:9", None) is None
