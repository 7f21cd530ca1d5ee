"""How pytest-xdist shares the suite between test processes (wired in tests/conftest.py).

Each test file runs whole in one process (its module fixtures run once), as with
``--dist loadfile``, with one exception: every file that holds real-vLLM tests (it
names ``pytest.mark.vllm``) belongs to one group, run first, one file after another in
one process. Each of those files starts a vLLM of its own; two at once would each get
half of the CPU and twice the memory. The other process meanwhile runs the rest.

(``--dist loadgroup`` with ``xdist_group`` marks would say this with marks, but
pytest-xdist 3.8 tags the group onto ``item._nodeid``, which pytest 9.2 no longer
reads, so its groups are silently ignored.)
"""

from __future__ import annotations

import functools
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parents[2]
VLLM_GROUP = "files with real-vLLM tests"


@functools.cache
def holds_vllm_tests(path: str) -> bool:
    try:
        return "pytest.mark.vllm" in (ROOT / path).read_text()
    except OSError:
        return False


def scope_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return VLLM_GROUP if holds_vllm_tests(path) else path


class FileScheduling(LoadScopeScheduling):
    """``loadfile``, except that the files with real-vLLM tests are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
