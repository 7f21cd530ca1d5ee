"""Where the crash-loop breaker keeps its restart ledger (``worker.crashloop.breaker``).

1. On the network volume, ``BASE_PATH/.vllm-worker/restart-ledger.json``: every worker
   of the endpoint shares it, so a fault that repeats on every host is counted across
   hosts and cold starts.
2. In a container without a volume (RunPod's default), in ``CRASH_LOOP_LEDGER_DIR`` on
   the container's own disk (the image sets ``/var/lib/vllm-worker``). A restart of the
   same container keeps its disk, so a worker failing again and again on one host is
   still stopped; a new container starts with an empty ledger.
3. Neither: no ledger, the breaker is off (logged as ``breaker.disabled``).

With CRASH_LOOP_LEDGER_DIR set (the image), only a mount point at BASE_PATH counts as
the volume: vLLM and the Hub create ``BASE_PATH/...`` cache folders on the container disk
when no volume is attached, and a ledger there after a restart would split the count.
Without it (a worker run outside the image) a writable BASE_PATH folder is the volume.

docs/image.md explains the choice for users.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from worker.crashloop.breaker import LEDGER_NAME


def writable_folder(path: Path) -> bool:
    """Whether ``path`` is a folder this process may write in, creating it if it can."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def ledger_path(
    base_path: Path,
    container_dir: Path | None,
    writable: Callable[[Path], bool] = writable_folder,
    mounted: Callable[[Path], bool] = os.path.ismount,
) -> tuple[Path | None, str]:
    """The ledger file to use and a one-line reason for the log.

    BASE_PATH is never created: a folder made there would pose as the volume.
    """
    on_volume = base_path / LEDGER_NAME
    usable = base_path.is_dir() and writable(base_path)
    if usable and (container_dir is None or mounted(base_path)):
        return on_volume, "on the network volume (BASE_PATH)"
    if container_dir is not None and writable(container_dir):
        return (
            container_dir / Path(LEDGER_NAME).name,
            f"no network volume mounted at BASE_PATH {base_path}: on the container disk "
            "(CRASH_LOOP_LEDGER_DIR), kept across restarts of this container",
        )
    return None, f"BASE_PATH {base_path} is not a writable folder and no CRASH_LOOP_LEDGER_DIR"
