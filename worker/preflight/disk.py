"""Will the download fit on the disk the HF cache is on?"""

from __future__ import annotations

import shutil
from pathlib import Path

from worker.preflight.prediction import Prediction
from worker.seams.gpus import GIB

MARGIN = 1.02


def free_bytes(path: Path) -> int | None:
    """Free bytes on the filesystem that holds ``path`` (or its nearest existing parent)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


def check_disk(cache_dir: Path, need: int, free: int | None) -> Prediction | None:
    """``need`` bytes still to download into ``cache_dir`` against ``free`` bytes there."""
    if free is None or need <= free * MARGIN:
        return None
    return Prediction(
        "disk-full",
        detail=f"The download needs {need / GIB:.2f} GiB but {cache_dir} has "
        f"{free / GIB:.2f} GiB free (found before launch).",
    )
