"""worker.seams.logs.configure: run in a child process, since it configures structlog for the
whole process (the tests' own structlog set-up stays untouched)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.vllm_env import ROOT

SCRIPT = """
import logging, os, structlog
from diagnostics.redaction.redact import Redactor
from worker.seams import logs
logs.configure(os.environ, Redactor(["s3cr3t-value-xyz"]))
log = structlog.get_logger("t")
log.debug("hidden")
log.info("shown", note="token s3cr3t-value-xyz here", nested={"k": ["s3cr3t-value-xyz"]})
logging.getLogger("transitions").debug("not at debug")
"""


def _run(**env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stderr.splitlines()


def test_on_runpod_events_are_json_lines_at_info_and_redacted() -> None:
    (line,) = _run(RUNPOD_ENDPOINT_ID="e1")
    event = json.loads(line)
    assert (event["event"], event["level"]) == ("shown", "info")
    assert "s3cr3t-value-xyz" not in line
    assert "timestamp" in event and event["note"].startswith("token ")


def test_without_a_terminal_events_are_json_too() -> None:
    (line,) = _run()  # stderr is a pipe here
    assert json.loads(line)["event"] == "shown"
