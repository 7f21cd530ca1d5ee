"""Read a model that is already on this machine: a local folder (a baked model, or a
MODEL that is a path) or, in offline mode, the Hugging Face cache's snapshot of a repo.

The folder is input like the hub's answer: at most ``MAX_FILES`` files are listed, and
``config.json`` and the safetensors indexes are read only when they are regular files
of a bounded size (a FIFO would block, ``/dev/zero`` would never end), then checked
against the same schema (``worker.modelinfo.schema``)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from worker.modelinfo.facts import ModelFacts
from worker.modelinfo.weight_plan import MISTRAL_INDEX, SAFE_INDEX

MAX_CONFIG_BYTES = 2 << 20  # config.json: real ones are a few KB, the largest ~1 MB
MAX_INDEX_BYTES = 32 << 20  # a safetensors index: ~9 MB for a 671B model


class TooLarge(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str) -> Any:
    """Strict JSON: NaN and Infinity are not numbers; nesting too deep is not JSON."""
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_bounded(path: Path, limit: int) -> bytes:
    """A regular file of at most ``limit`` bytes; OSError or TooLarge otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path.name} is larger than {limit >> 20} MiB")
    return data


def _json_file(path: Path, limit: int, problems: list[str]) -> Any:
    try:
        return loads(read_bounded(path, limit))
    except FileNotFoundError:
        return None
    except TooLarge as exc:
        problems.append(str(exc))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name} not read: {exc}")
    return None


def read_folder(root: Path, source: str = "local") -> ModelFacts | None:
    """config.json and file sizes of a model folder; None when it is not one."""
    if not root.is_dir():
        return None
    # The schemas (pydantic) load when a model's files are first read, not at import.
    from worker.modelinfo.schema import MAX_FILES, check_index, clean_config

    files: dict[str, int] = {}
    problems: list[str] = []
    for path in root.rglob("*"):
        if ".cache" in path.relative_to(root).parts:
            continue
        if len(files) >= MAX_FILES:
            problems.append(f"more than {MAX_FILES} files: the listing is incomplete")
            return ModelFacts(source=source, files={}, local=True, problems=tuple(problems))
        try:
            info = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            files[path.relative_to(root).as_posix()] = info.st_size
    raw = _json_file(root / "config.json", MAX_CONFIG_BYTES, problems)
    config, bad = clean_config(raw)
    problems += bad
    indexes = {}
    for name in (SAFE_INDEX, MISTRAL_INDEX):
        if name in files:
            names = check_index(_json_file(root / name, MAX_INDEX_BYTES, problems))
            if names is not None:
                indexes[name] = names
    return ModelFacts(
        source=source,
        config=config,
        files=files,
        local=True,
        indexes=indexes,
        problems=tuple(problems),
    )


def cached_snapshot(cache_dir: Path, repo_id: str, revision: str | None) -> Path | None:
    """The snapshot folder of ``repo_id`` at ``revision`` in an HF cache, if present."""
    repo_dir = cache_dir / ("models--" + repo_id.replace("/", "--"))
    ref = revision or "main"
    commit = ref
    ref_file = repo_dir / "refs" / ref
    if ref_file.is_file():
        try:
            commit = read_bounded(ref_file, 256).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return None
    if not commit or "/" in commit or commit in (".", ".."):
        return None
    snapshot = repo_dir / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None
