"""worker/queue/sdk_cpu.py: the RunPod SDK imported without py-cpuinfo's second interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.vllm_env import ROOT
from worker.queue.sdk_cpu import brand_from, processor_brand

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU implementer\t: 0x41

Model\t\t: Raspberry Pi 4 Model B Rev 1.4
"""


def test_the_brand_is_read_from_cpuinfo_lines():
    assert brand_from(X86.splitlines()) == "Intel(R) Xeon(R) Platinum 8480+"
    assert brand_from(ARM.splitlines()) == "Raspberry Pi 4 Model B Rev 1.4"
    assert brand_from(["model name\t:   ", "flags : x"]) is None
    assert brand_from([]) is None


def test_an_unreadable_cpuinfo_still_names_something(tmp_path: Path):
    assert processor_brand(tmp_path / "missing")
    (tmp_path / "cpuinfo").write_text(X86)
    assert processor_brand(tmp_path / "cpuinfo") == "Intel(R) Xeon(R) Platinum 8480+"


def test_the_sdk_imports_without_a_subprocess_and_names_the_same_processor():
    import cpuinfo

    # What py-cpuinfo itself answers, by the second interpreter it normally starts.
    reference = subprocess.run(
        [sys.executable, cpuinfo.cpuinfo.__file__, "--json"], capture_output=True, check=True
    )
    expected = json.loads(reference.stdout)["brand_raw"]
    probe = textwrap.dedent(
        """
        import subprocess, sys
        plain_popen = subprocess.Popen
        class NoSecondPython(plain_popen):  # `file -b` from platform.architecture() may run
            def __init__(self, args, *rest, **kwargs):
                if any(sys.executable in str(arg) or "cpuinfo" in str(arg) for arg in args):
                    raise AssertionError(f"a Python subprocess while importing: {args!r}")
                super().__init__(args, *rest, **kwargs)
        subprocess.Popen = NoSecondPython
        import worker.queue.intake, worker.queue.job_fetch, worker.main  # every importer of the SDK
        import runpod.serverless
        from runpod.serverless.utils import rp_debugger
        print(rp_debugger.PROCESSOR)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
