"""The ``diagnose`` command: formats, exit codes, clear one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from diagnostics.command.cli import main

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "corpus"
KV = FIXTURES / "kv_cache" / "vllm-16141-v083-second-instance-v1-no-cache-blocks.log"
OK = FIXTURES / "ok" / "vllm-16141-v083-v1-first-instance-startup-ok.log"
NET = FIXTURES / "network" / "tt-inference-server-4628-galaxy-llama33-70b-hf-connection-reset.log"


def test_json_has_one_object_per_file(capsys):
    assert main(["--format", "json", str(KV), str(OK), str(NET)]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in rows] == [str(KV), str(OK), str(NET)]
    kv, ok, net = rows
    for key in ("state", "category", "permanent", "rule", "evidence", "cause", "fix", "message"):
        assert key in kv
    assert kv["state"] == "failed-permanent" and kv["category"] == "kv_cache"
    assert kv["permanent"] is True
    assert set(kv["evidence"]) == {"line", "text"}
    assert kv["message"] == f"{kv['cause']} {kv['fix']}"
    assert ok["state"] == "ready" and ok["category"] == "ok" and ok["permanent"] is None
    assert net["state"] == "failed-transient" and net["permanent"] is False


def test_text_names_verdict_cause_fix_and_evidence(capsys):
    assert main([str(KV)]) == 1
    out = capsys.readouterr().out
    assert "FAILED (permanent" in out
    assert "GPU_MEMORY_UTILIZATION" in out
    assert "evidence: line " in out


def test_ready_log_exits_zero(capsys):
    assert main([str(OK)]) == 0


def test_stdin(monkeypatch, capsys):
    data = KV.read_bytes()

    class Stdin:
        buffer = __import__("io").BytesIO(data)

    monkeypatch.setattr(sys, "stdin", Stdin)
    assert main(["--format", "json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["category"] == "kv_cache"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty input"), (b"\x00\x01\x02binary", "binary input")],
)
def test_unusable_input_is_a_one_line_error(tmp_path, capsys, content, message):
    path = tmp_path / "x.log"
    path.write_bytes(content)
    assert main([str(path), str(KV)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().startswith(f"diagnose: {path}: {message}")
    assert len(captured.err.strip().splitlines()) == 1
    assert "kv_cache" in captured.out  # the other input is still diagnosed


def test_unreadable_file(tmp_path, capsys):
    assert main([str(tmp_path / "missing.log")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"diagnose: {tmp_path / 'missing.log'}: No such file or directory"
    )


def test_broken_rule_pack(tmp_path, capsys):
    (tmp_path / "10-x.yaml").write_text("rules: [\n")
    assert main(["--rules", str(tmp_path), str(KV)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("diagnose: broken rule pack: 10-x.yaml: invalid YAML")
    assert len(err.strip().splitlines()) == 1


def test_console_script_runs_without_traceback(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    result = subprocess.run(
        [sys.executable, "-m", "diagnostics.command.cli", str(empty)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_reversed_runpod_console_export(capsys):
    path = (
        FIXTURES
        / "remote_code"
        / "dots-ocr-123-runpod-serverless-reversed-log-trust-remote-code.log"
    )
    assert main(["--format", "json", str(path)]) == 1
    row = json.loads(capsys.readouterr().out)
    assert row["category"] == "remote_code"
    assert "TRUST_REMOTE_CODE=true" in row["fix"]


# Hostile and unusual inputs (issue 11: 7, 14, 17)

MAX_LEN = FIXTURES.parent / "vllm-0.32" / "max-model-len-too-large.log"
REVERSED = (
    FIXTURES / "remote_code" / "dots-ocr-123-runpod-serverless-reversed-log-trust-remote-code.log"
)


def test_closed_stdin_is_a_one_line_error():
    result = subprocess.run(
        [sys.executable, "-m", "diagnostics.command.cli", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        preexec_fn=lambda: __import__("os").close(0),
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "diagnose: -: standard input is closed"


def _diagnose_bytes(_tmp_path, data: bytes) -> dict:
    return _PACK_DIAGNOSE(data)


def _pack_diagnose():
    import io
    from functools import cache

    from diagnostics.command.render import to_json
    from diagnostics.pack.rules import load_pack
    from diagnostics.scanning.scan import classify_stream

    pack = cache(load_pack)

    def diagnose(data: bytes) -> dict:
        return json.loads(to_json(classify_stream(io.BytesIO(data), pack()), "x.log"))

    return diagnose


_PACK_DIAGNOSE = _pack_diagnose()


def test_cr_only_log_keeps_the_numbers(tmp_path):
    expected = _diagnose_bytes(tmp_path, MAX_LEN.read_bytes())
    assert "8192" in expected["message"] and "2048" in expected["message"]
    mac = _diagnose_bytes(tmp_path, MAX_LEN.read_bytes().replace(b"\n", b"\r"))
    assert mac["message"] == expected["message"]
    assert mac["evidence"]["text"] == expected["evidence"]["text"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_logs_with_a_byte_order_mark_are_decoded(tmp_path, encoding):
    text = MAX_LEN.read_text(encoding="utf-8")
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    expected = _diagnose_bytes(tmp_path, MAX_LEN.read_bytes())
    assert _diagnose_bytes(tmp_path, data) == expected


def test_a_console_export_larger_than_any_limit_is_read_to_the_end(tmp_path):
    """Newest-first export: the cause sits after 75 MB of later lines (the reader once
    stopped at 72 MB and answered "starting")."""
    lines = REVERSED.read_bytes().splitlines(keepends=True)
    filler = b"datgo1t12vudsh[info]" + b"heartbeat " * 1000 + b"\n"
    count = 75 * 1024 * 1024 // len(filler)
    data = lines[0] + filler * count + b"".join(lines[1:])
    row = _diagnose_bytes(tmp_path, data)
    assert row["category"] == "remote_code"
    assert row["evidence"]["line"] == 4 + count  # line 4 of the recorded export


class _Endless:
    """A stream of one line with no newline, made as it is read (never held whole)."""

    def __init__(self, size: int, tail: bytes):
        self.left, self.tail = size, tail

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            out, self.tail = self.tail[:size], self.tail[size:]
            return out
        n = min(size, self.left)
        self.left -= n
        return b"ab " * (n // 3) + b"c" * (n % 3)


def test_a_line_without_end_is_read_in_bounded_memory():
    import tracemalloc

    from diagnostics.pack.rules import load_pack
    from diagnostics.scanning.scan import classify_stream

    pack = load_pack()
    tail = b"\n" + KV.read_bytes()
    tracemalloc.start()
    try:
        diagnosis = classify_stream(_Endless(64 * 1024 * 1024, tail), pack)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert diagnosis.category == "kv_cache"
    assert peak < 16 * 1024 * 1024, peak  # a few MiB-long lines at most, never 64 MiB
