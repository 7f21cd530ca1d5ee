"""How pytest-xdist shares the suite between test processes (wired in tests/conftest.py).

Each test file runs whole in one process (its module fixtures run once), as with
``--dist loadfile``, with one exception: every file that holds real-vLLM tests (it
names ``pytest.mark.vllm``) belongs to one group, run first, one file after another in
one process. Each of those files starts a vLLM of its own; two at once would each get
half of the CPU and twice the memory. The other process meanwhile runs the rest.

Files are handed out in three tiers, each in collection order: that group first, then
the files that start processes (worker processes, stand-ins, scripts: long, and mostly
waiting on their children, so their waits overlap the others' work), then the rest
(many short, CPU-bound files that fill the processes' ends evenly): the longest work
first, so no process is left with a long file while the others are done.

(``--dist loadgroup`` with ``xdist_group`` marks would say this with marks, but
pytest-xdist 3.8 tags the group onto ``item._nodeid``, which pytest 9.2 no longer
reads, so its groups are silently ignored.)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parents[2]
VLLM_GROUP = "files with real-vLLM tests"


_STARTS_PROCESSES = re.compile(r"start_worker|running_worker|run_python|subprocess\.|Popen")


@functools.cache
def _text(path: str) -> str:
    try:
        return (ROOT / path).read_text()
    except OSError:
        return ""


@functools.cache
def tier(scope: str) -> int:
    """0: the real-vLLM group; 1: a file that starts processes; 2: any other."""
    if scope == VLLM_GROUP:
        return 0
    return 1 if _STARTS_PROCESSES.search(_text(scope)) else 2


@functools.cache
def holds_vllm_tests(path: str) -> bool:
    return "pytest.mark.vllm" in _text(path)


def scope_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return VLLM_GROUP if holds_vllm_tests(path) else path


class FileScheduling(LoadScopeScheduling):
    """``loadfile``, except that the files with real-vLLM tests are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def add_node_collection(self, node, collection: Sequence[str]) -> None:
        """The collection in tiers (a stable sort: each file's tests keep their order)."""
        ordered = sorted(collection, key=lambda nodeid: tier(scope_of(nodeid)))
        super().add_node_collection(node, ordered)
