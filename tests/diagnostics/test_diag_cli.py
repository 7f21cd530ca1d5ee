"""The ``diagnose`` command: formats, exit codes, clear one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from diagnostics.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "corpus"
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
        [sys.executable, "-m", "diagnostics.cli", str(empty)], capture_output=True, text=True
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
