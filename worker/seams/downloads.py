"""Watch a Hugging Face cache for downloads in progress.

vLLM 0.32 downloads weights without printing progress; the only live signal is the
``*.incomplete`` blobs growing in the cache. ``DownloadWatch.sample()`` reads the
disk (the caller decides how often) and reports bytes so far and the rate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DownloadProgress:
    bytes_done: int
    rate_bps: float
    total_bytes: int | None
    active: bool  # incomplete files exist and grew since the last sample


def hf_cache_dir(env: dict[str, str]) -> Path:
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


class DownloadWatch:
    def __init__(self, cache_dir: Path, total_bytes: int | None = None):
        self.cache_dir = cache_dir
        self.total_bytes = total_bytes
        self._last_bytes = 0
        self._last_time: float | None = None
        self._completed = 0

    def sample(self, now: float) -> DownloadProgress:
        incomplete, complete = _sizes(self.cache_dir)
        current = incomplete + complete
        grew = incomplete > 0 and current > self._last_bytes
        rate = 0.0
        if self._last_time is not None and now > self._last_time and current >= self._last_bytes:
            rate = (current - self._last_bytes) / (now - self._last_time)
        self._last_bytes, self._last_time = current, now
        return DownloadProgress(current, rate, self.total_bytes, grew)


def _sizes(root: Path) -> tuple[int, int]:
    """(bytes in *.incomplete blobs, bytes in complete blobs) under the cache."""
    incomplete = complete = 0
    try:
        repos = list(os.scandir(root))
    except OSError:
        return 0, 0
    for repo in repos:
        blobs = Path(repo.path) / "blobs"
        try:
            entries = list(os.scandir(blobs))
        except OSError:
            continue
        for entry in entries:
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if entry.name.endswith(".incomplete"):
                incomplete += size
            else:
                complete += size
    return incomplete, complete
