"""The committed vLLM model-registry snapshot (worker/preflight/vllm_models.json) matches the
installed vLLM. Runs vLLM's python (.venv-vllm, or $VLLM_PYTHON); skips only when that
interpreter does not exist."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "snapshot_vllm_models.py"
SNAPSHOT = ROOT / "worker" / "preflight" / "vllm_models.json"
RESNAPSHOT = ".venv-vllm/bin/python scripts/snapshot_vllm_models.py"

pytestmark = pytest.mark.vllm  # imports vLLM (~6 s): with the real-vLLM tests


def test_model_snapshot_matches_installed_vllm() -> None:
    python = Path(os.environ.get("VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
    if not python.exists():
        pytest.skip(f"no vLLM python at {python} (run scripts/setup-env or set VLLM_PYTHON)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    done = subprocess.run(
        [str(python), str(SCRIPT), "--print"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    committed = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    fresh = json.loads(done.stdout)
    if fresh != committed:
        changed = [k for k in fresh.keys() | committed.keys() if fresh.get(k) != committed.get(k)]
        detail = []
        for key in sorted(changed):
            old, new = committed.get(key), fresh.get(key)
            if isinstance(old, list) and isinstance(new, list):
                detail.append(
                    f"{key}: +{sorted(set(new) - set(old))[:10]} -{sorted(set(old) - set(new))[:10]}"
                )
            else:
                detail.append(f"{key}: {old!r} -> {new!r}")
        pytest.fail(f"vLLM's model registry changed ({'; '.join(detail)}); rerun `{RESNAPSHOT}`")
    assert done.stdout == SNAPSHOT.read_text(encoding="utf-8")
