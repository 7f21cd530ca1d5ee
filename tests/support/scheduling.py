"""How pytest-xdist shares the suite between test processes (wired in tests/conftest.py).

Each test file runs whole in one process (its module fixtures run once), as with
``--dist loadfile``, with one exception: the files that hold real-vLLM tests (they name
``pytest.mark.vllm``) form groups, run first, each one file after another in one
process. Each of those files starts vLLMs of its own; a real vLLM start is mostly one
busy core and waits, so two groups (the files alternately, by path) run at once where
the machine has two cores and 16 GiB (each test vLLM reserves a quarter of the memory):
the whole suite took 358 s in one group and 253 s in two (three test processes) on an
idle 2-core machine, and 371 s in two with another process busy on one core
(2026-12-02). Each test process takes the other files when its group is done.

The other files go longest first (``by_expected_time``), so that the last minute of a
run is not one process waiting on its children while the others are done: their wall
times are in ``durations.json`` beside this module, measured by a run with
``TEST_DURATIONS=1`` (``record_durations``); a file not in it counts as a short one.
On 2 cores with another process busy on one, ``-m "not vllm"`` ended its four test
processes 8 s apart in file order (the files of worker processes, which mostly wait,
came last) and took 64 s.

(``--dist loadgroup`` with ``xdist_group`` marks would say this with marks, but
pytest-xdist 3.8 tags the group onto ``item._nodeid``, which pytest 9.2 no longer
reads, so its groups are silently ignored.)
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parents[2]
VLLM_GROUP = "files with real-vLLM tests"
DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_S = 0.5  # a file not measured yet


@functools.cache
def holds_vllm_tests(path: str) -> bool:
    try:
        return "pytest.mark.vllm" in (ROOT / path).read_text()
    except OSError:
        return False


@functools.cache
def vllm_files() -> tuple[str, ...]:
    """Every test file with real-vLLM tests, relative to the root, sorted."""
    found = (str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    return tuple(sorted(path for path in found if holds_vllm_tests(path)))


@functools.cache
def vllm_groups() -> int:
    """How many vLLMs may start at once: two where the cores and the memory allow
    (each test vLLM reserves a quarter of the host's memory, GPU_MEMORY_UTILIZATION),
    else one."""
    cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 0
    return 2 if cores >= 2 and memory >= 16 * 2**30 else 1


def scope_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if not holds_vllm_tests(path):
        return path
    files = vllm_files()
    group = files.index(path) % vllm_groups() if path in files else 0
    return f"{VLLM_GROUP} {group + 1}"


def is_vllm_scope(scope: str) -> bool:
    return scope.startswith(VLLM_GROUP)


class FileScheduling(LoadScopeScheduling):
    """``loadfile``, except that the files with real-vLLM tests are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


@functools.cache
def expected_seconds() -> Mapping[str, float]:
    """Each test file's wall time in the run that measured it (``record_durations``)."""
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def by_expected_time(nodeid: str) -> tuple[bool, float]:
    """The sort key of a test: the real-vLLM groups first, then the longest files."""
    path = nodeid.split("::", 1)[0]
    return not is_vllm_scope(scope_of(nodeid)), -expected_seconds().get(path, UNKNOWN_S)


def record_durations(measured: Mapping[str, float]) -> None:
    """Write ``measured`` (seconds per file) over the table, keeping the files not run."""
    table = {**expected_seconds(), **{f: round(s, 2) for f, s in measured.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
