"""Read a model that is already on this machine: a local folder (a baked model, or a
MODEL that is a path) or, in offline mode, the Hugging Face cache's snapshot of a repo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worker.modelinfo.facts import ModelFacts


def read_folder(root: Path, source: str = "local") -> ModelFacts | None:
    """config.json and file sizes of a model folder; None when it is not one."""
    if not root.is_dir():
        return None
    files: dict[str, int] = {}
    for path in root.rglob("*"):
        if path.is_file() and ".cache" not in path.parts:
            try:
                files[path.relative_to(root).as_posix()] = path.stat().st_size
            except OSError:
                continue
    config: dict[str, Any] | None = None
    try:
        loaded = json.loads((root / "config.json").read_text(encoding="utf-8"))
        config = loaded if isinstance(loaded, dict) else None
    except (OSError, ValueError):
        config = None
    return ModelFacts(source=source, config=config, files=files, local=True)


def cached_snapshot(cache_dir: Path, repo_id: str, revision: str | None) -> Path | None:
    """The snapshot folder of ``repo_id`` at ``revision`` in an HF cache, if present."""
    repo_dir = cache_dir / ("models--" + repo_id.replace("/", "--"))
    ref = revision or "main"
    commit = ref
    ref_file = repo_dir / "refs" / ref
    if ref_file.is_file():
        try:
            commit = ref_file.read_text().strip()
        except OSError:
            return None
    snapshot = repo_dir / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None
