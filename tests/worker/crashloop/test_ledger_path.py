"""Where the crash-loop breaker's ledger lives: the volume, else the container disk."""

from __future__ import annotations

from pathlib import Path

from worker.crashloop.ledger_path import ledger_path, writable_folder


def test_a_mounted_volume_holds_the_ledger(tmp_path: Path) -> None:
    path, reason = ledger_path(tmp_path, tmp_path / "disk", mounted=lambda p: p == tmp_path)
    assert path == tmp_path / ".vllm-worker" / "restart-ledger.json"
    assert "network volume" in reason
    assert not (tmp_path / "disk").exists()


def test_without_a_volume_the_container_disk_holds_it(tmp_path: Path) -> None:
    volume, disk = tmp_path / "runpod-volume", tmp_path / "var" / "lib" / "vllm-worker"
    path, reason = ledger_path(volume, disk, mounted=lambda p: False)
    assert path == disk / "restart-ledger.json" and disk.is_dir()
    assert "CRASH_LOOP_LEDGER_DIR" in reason
    assert not volume.exists()  # never created: it would pose as the volume


def test_cache_folders_made_at_base_path_are_not_a_volume(tmp_path: Path) -> None:
    """vLLM and the Hub create BASE_PATH/... on the container disk when no volume is
    mounted; after a restart the ledger must stay where the first failure was counted."""
    volume, disk = tmp_path / "runpod-volume", tmp_path / "disk"
    (volume / "huggingface-cache").mkdir(parents=True)
    path, _ = ledger_path(volume, disk, mounted=lambda p: False)
    assert path == disk / "restart-ledger.json"


def test_outside_the_image_a_writable_base_path_is_the_volume(tmp_path: Path) -> None:
    path, _ = ledger_path(tmp_path, None, mounted=lambda p: False)
    assert path == tmp_path / ".vllm-worker" / "restart-ledger.json"


def test_a_read_only_volume_falls_back_too(tmp_path: Path) -> None:
    volume, disk = tmp_path / "volume", tmp_path / "disk"
    volume.mkdir()
    path, _ = ledger_path(
        volume,
        disk,
        writable=lambda p: p != volume and writable_folder(p),
        mounted=lambda p: True,
    )
    assert path == disk / "restart-ledger.json"


def test_no_volume_and_no_container_dir_turns_the_breaker_off(tmp_path: Path) -> None:
    path, reason = ledger_path(tmp_path / "missing", None)
    assert path is None and "no CRASH_LOOP_LEDGER_DIR" in reason


def test_an_unusable_container_dir_turns_it_off(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    path, _ = ledger_path(tmp_path / "missing", blocker / "sub", mounted=lambda p: False)
    assert path is None
