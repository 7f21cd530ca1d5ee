"""The labelled fixture logs, shared by the diagnostics tests (read from fixtures/ only)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# corpus: real logs from public reports; vllm-0.32: recorded by scripts/record_vllm_fixtures.py;
# recorded-container: real vLLM 0.32 runs under container conditions (a 64 MiB /dev/shm).
CORPUS_DIRS = [FIXTURES / "corpus", FIXTURES / "vllm-0.32", FIXTURES / "recorded-container"]


def labelled() -> list[tuple[Path, dict]]:
    cases = []
    for root in CORPUS_DIRS:
        manifest = root / "manifest.jsonl"
        if not manifest.exists():
            continue
        for line in manifest.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                cases.append((root / entry["file"], entry))
    return cases


def case_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}/{path.stem}"
