"""The diagnostics core is pure: importing and using it pulls in no process, network or
state-machine library, and it never imports the worker."""

from __future__ import annotations

import subprocess
import sys

from tests.support.vllm_env import ROOT


def test_diagnostics_imports_nothing_of_the_worker_side():
    code = (
        "import sys, io\n"
        "from diagnostics.scanning.scan import classify_stream\n"
        "from diagnostics.command.cli import main\n"
        "from diagnostics import load_pack\n"
        "classify_stream(io.BytesIO(b'ValueError: x\\n'), load_pack())\n"
        "bad = [m for m in ('runpod', 'httpx', 'transitions', 'subprocess', 'socket', 'worker', 'asyncio') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
