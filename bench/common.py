"""What the benchmark scripts share: stopping a process group they started, percentiles."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
from pathlib import Path


def stop_group(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), wait up to
    ``grace_s`` for it, then SIGKILL it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def parse_args(
    parser: argparse.ArgumentParser, argv: list[str] | None = None
) -> argparse.Namespace:
    """``parser``'s arguments plus ``--json PATH``, where every bench writes its numbers."""
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    return parser.parse_args(argv)


def write_json(path: Path | None, results: object) -> None:
    """``results`` as JSON in ``path`` (the ``--json`` option), where one was given."""
    if path is not None:
        path.write_text(json.dumps(results, indent=2, default=str) + "\n")
