"""Suite-wide checks.

The secret check: every worker a test starts carries a planted HF token
(``tests.support.vllm_env.PLANTED_TOKEN``). After each test, every file the test wrote
under its tmp_path (worker stdout/stderr, logs) and every answer and stream chunk a
local job queue received must be free of it.
"""

from __future__ import annotations

import json

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
            if path.is_file() and not path.is_symlink() and path.stat().st_size < _MAX_SCANNED:
                if PLANTED_TOKEN.encode() in path.read_bytes():
                    leaks.append(str(path.relative_to(root)))
    assert not leaks, f"the planted HF token leaked into: {leaks}"
