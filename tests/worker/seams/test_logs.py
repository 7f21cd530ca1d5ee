"""worker.seams.logs.configure: run in a child process, since it configures structlog for the
whole process (the tests' own structlog set-up stays untouched)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.vllm_env import ROOT, run_python

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


# A signal that arrives while the main thread writes a log line: the line's write
# delivers SIGUSR1 to the process, so Python runs the handler inside the write, with
# the output's lock held. A handler that logged directly waited for that lock forever.
INTERRUPTED_WRITE = """
import os, signal, sys, time
import structlog
from diagnostics.redaction.redact import Redactor
from worker.seams import logs

class Interrupting:
    def __init__(self, path):
        self.out, self.fired = open(path, "w"), False
    def write(self, text):
        if not self.fired:
            self.fired = True
            os.kill(os.getpid(), signal.SIGUSR1)
        return self.out.write(text)
    def flush(self):
        self.out.flush()
    def isatty(self):
        return False

path = sys.argv[1]
sys.stderr = Interrupting(path)
logs.configure({}, Redactor([]))
log = structlog.get_logger()
signal.signal(signal.SIGUSR1, lambda *_: logs.from_signal_handler(log, "from.handler", n=1))
log.info("first")
log.info("second")
deadline = time.monotonic() + 20
while "from.handler" not in open(path).read() and time.monotonic() < deadline:
    time.sleep(0.01)
"""


def test_a_signal_handler_that_logs_during_a_write_neither_hangs_nor_breaks_a_line(tmp_path):
    out = tmp_path / "log.jsonl"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = run_python(["-c", INTERRUPTED_WRITE, str(out)], env, timeout=60)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line)["event"] for line in out.read_text().splitlines()]
    assert sorted(events) == ["first", "from.handler", "second"]
