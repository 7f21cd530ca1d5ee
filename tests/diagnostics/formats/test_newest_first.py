"""A log export that lists the newest line first (CloudWatch Logs Insights' CSV, gcloud
logging read, Loki) is known by its collector's timestamps going back in time, and read
back to front: judged as the start ran, not from its last line (its first)."""

from __future__ import annotations

import io

from diagnostics.formats.order import _head, _newest_first_by_time
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()

START = [
    "INFO 03-04 16:20:01 api_server.py:1] vLLM API server version 0.7.3",
    "INFO 03-04 16:20:30 model_runner.py:1] Starting to load model meta-llama/Llama-3.1-8B",
    "INFO 03-04 16:21:40 model_runner.py:1] Loading model weights took 14.99 GB",
]
UP = [
    "INFO:     Started server process [7]",
    "INFO:     Application startup complete.",
    'INFO:     10.0.12.87:61733 - "GET /health HTTP/1.1" 200 OK',
]


def export(lines: list[str], newest_first: bool) -> bytes:
    stamped = [
        f'2025-03-04 16:{20 + n // 60:02d}:{n % 60:02d}.{n:03d},"{line}"'
        for n, line in enumerate(lines)
    ]
    rows = stamped[::-1] if newest_first else stamped
    return ("@timestamp,@message\n" + "\n".join(rows) + "\n").encode()


def test_a_start_that_came_up_listed_newest_first_is_ready():
    lines = [*START, *UP]
    for newest_first in (False, True):
        data = export(lines, newest_first)
        assert _newest_first_by_time(_head(data)) is newest_first
        assert str(classify_stream(io.BytesIO(data), PACK).state) == "ready", newest_first


def test_a_failure_listed_newest_first_is_the_failure():
    lines = [
        *START,
        "ValueError: The model's max seq len (131072) is larger than the maximum number of "
        "tokens that can be stored in KV cache (36720). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ]
    forward = classify_stream(io.BytesIO(export(lines, False)), PACK)
    backward = classify_stream(io.BytesIO(export(lines, True)), PACK)
    assert str(forward.category) == str(backward.category) == "kv_cache"


def test_timestamps_that_do_not_go_back_are_read_as_they_come():
    same_second = [f"2025-03-04 16:20:01,{line}" for line in [*START, *UP]]
    assert not _newest_first_by_time(_head("\n".join(same_second).encode()))
    assert not _newest_first_by_time(_head(export([*START, *UP], False)))
    too_few = export(UP, True)  # three stamped lines say too little
    assert not _newest_first_by_time(_head(too_few))


def _kibana(n: int) -> str:
    return f'"Mar 27, 2025 @ 18:{20 + n // 60:02d}:{n % 60:02d}.{n:03d}",vllm-0'


def _azure(n: int) -> str:
    # a 12-hour clock: 11:59 AM, then past noon
    hour, minute = (11, 59) if n < 2 else (12, n % 60)
    return f'"3/12/2025, {hour}:{minute:02d}:{n % 60:02d}.{n:03d} {"AM" if n < 2 else "PM"}",aks-node,vllm'


def test_kibanas_and_azures_csv_exports_listed_newest_first_are_read_back_to_front():
    """Kibana's ("Mar 27, 2025 @ 18:44:14.890") and Azure Log Analytics' ("3/12/2025,
    10:32:56.636 AM") time fields, with the fields they put before the message (held-out
    MS): a start that failed reads failed, one that came up reads ready."""
    failed = [
        *START,
        "INFO 03-04 16:21:41 weight_utils.py:1] Using model weights format ['*.safetensors']",
        "ValueError: Invalid repository ID or local directory specified: 'org/model'.",
    ]
    for stamp in (_kibana, _azure):
        for lines, state in (([*START, *UP], "ready"), (failed, "failed-permanent")):
            rows = [f'{stamp(n)},"{line}"' for n, line in enumerate(lines)]
            data = ("time,host,message\n" + "\n".join(rows[::-1]) + "\n").encode()
            assert _newest_first_by_time(_head(data))
            assert str(classify_stream(io.BytesIO(data), PACK).state) == state
