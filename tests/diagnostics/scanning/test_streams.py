"""Logs in a container runtime's JSON format are read as the lines they hold
(diagnostics.scanning.streams), whole logs and block by block."""

from __future__ import annotations

import io
import json

from diagnostics.pack.rules import load_pack
from diagnostics.scanning.scan import classify_stream
from diagnostics.scanning.streams import MAX_LINE, decoded

LINES = [
    "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.0",
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
    "that can be stored in KV cache (20000). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine.",
]


def _docker(lines: list[str]) -> bytes:
    rows = [
        {"log": f"{line}\n", "stream": "stderr", "time": "2024-05-01T12:00:00Z"} for line in lines
    ]
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _read_all(data: bytes, block: int) -> bytes:
    stream = io.BytesIO(data)
    first, reader = decoded(stream.read(block), stream, block)
    out = [first]
    while chunk := reader.read(block):
        out.append(chunk)
    return b"".join(out)


def test_a_docker_json_log_is_read_as_its_lines_in_any_block_size():
    expected = "".join(f"{line}\n" for line in LINES).encode()
    for block in (7, 64, 1 << 16):
        assert _read_all(_docker(LINES), block) == expected


def test_a_docker_json_log_is_diagnosed_like_the_plain_one():
    pack = load_pack()
    plain = classify_stream(io.BytesIO("\n".join(LINES).encode()), pack)
    assert classify_stream(io.BytesIO(_docker(LINES)), pack) == plain
    assert plain.rule is not None and str(plain.category) == "kv_cache"


def test_lines_that_are_not_json_objects_pass_as_they_are():
    data = _docker(LINES[:1]) + b"not json at all\n" + b'{"log": 3}\n' + b'{"log": "x\n'
    assert _read_all(data, 64) == (
        LINES[0].encode() + b"\nnot json at all\n" + b'{"log": 3}\n' + b'{"log": "x\n'
    )


def test_a_plain_log_that_mentions_log_keys_is_left_alone():
    data = b'INFO {"log": "x"} is not the format\n{"log": "y\\n"}\n'
    assert _read_all(data, 64) == data


def test_a_json_line_longer_than_the_line_limit_passes_undecoded():
    long_line = json.dumps({"log": "x" * (MAX_LINE + 10)}).encode() + b"\n"
    data = _docker(LINES[:1]) + long_line
    out = _read_all(data, 1 << 16)
    assert out.startswith(LINES[0].encode() + b"\n")
    assert len(out) == len(LINES[0]) + 1 + len(long_line)


def test_a_structured_loggers_json_lines_are_read_by_their_message():
    rows = [{"severity": "ERROR", "message": line} for line in LINES]
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    assert _read_all(data, 64) == "".join(f"{line}\n" for line in LINES).encode()
