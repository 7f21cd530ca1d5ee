"""Suite-wide checks.

The secret check: every worker a test starts carries a planted HF token
(``tests.support.vllm_env.PLANTED_TOKEN``). After each test, every file the test wrote
under its tmp_path (worker stdout/stderr, logs) and every answer and stream chunk a
local job queue received must be free of it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import PLANTED_TOKEN

_MAX_SCANNED = 64 * 1024 * 1024


@pytest.fixture(autouse=True)
def no_secret_leaks(request):
    before = len(QueueServer.started)
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    leaks = []
    for queue in QueueServer.started[before:]:
        for job_id in list(queue.results):
            record = queue.job(job_id)
            blob = json.dumps([record.done, record.stream], default=str)
            if PLANTED_TOKEN in blob:
                leaks.append(f"job {job_id} answer")
    if root is not None:
        for path in root.rglob("*"):
            scannable = path.is_file() and not path.is_symlink()
            if (
                scannable
                and path.stat().st_size < _MAX_SCANNED
                and PLANTED_TOKEN.encode() in path.read_bytes()
            ):
                leaks.append(str(path.relative_to(root)))
    assert not leaks, f"the planted HF token leaked into: {leaks}"


_OUTCOMES: list[tuple[str, str, str, str]] = []


@pytest.fixture
def reliability(request):
    """Record a fault-injection outcome: (fault, expected state, what happened)."""

    def record(fault: str, expected: str, outcome: str) -> None:
        _OUTCOMES.append((request.node.nodeid.split("::")[-1], fault, expected, outcome))

    return record


SOAK_NOTE = (
    "\nNot a test: the soak benchmark (`bench/soak.py`, 30 concurrent streaming jobs for 10 "
    "minutes through the real SDK job loop) is in `docs/benchmarks.md` §3, with its errors "
    "and the worker's RSS at the start and the end.\n"
)


def pytest_sessionfinish(session, exitstatus):
    """With RELIABILITY_DOC=1, update docs/reliability.md with the recorded outcomes
    (rows of tests not run this time are kept)."""
    if os.environ.get("RELIABILITY_DOC") != "1" or not _OUTCOMES:
        return
    path = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"
    rows: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("| ") and line.endswith("` |") and "`test_" in line:
                rows[line.rsplit("`", 2)[1]] = line
    for test, fault, expected, outcome in _OUTCOMES:
        rows[test] = f"| {fault} | {expected} | {outcome} | `{test}` |"
    text = (
        "# Reliability: faults injected and what happened\n\n"
        "Produced by the fault-injection tests: `RELIABILITY_DOC=1 ./scripts/test "
        "tests/integration/test_faults.py tests/integration/test_worker_ready.py tests/integration/test_breaker.py` rewrites "
        "the rows of the tests it runs. Each row is a test that passed; the suite asserts "
        "every outcome.\n\n"
        "| fault | expected state | outcome | test |\n|---|---|---|---|\n"
        + "\n".join(rows[k] for k in sorted(rows))
        + "\n"
        + SOAK_NOTE
    )
    path.write_text(text)
