"""Render a diagnosis for people (text) and programs (JSON). No I/O here."""

from __future__ import annotations

import json

from diagnostics.model import Diagnosis

_VERDICT = {
    "failed-permanent": "FAILED (permanent: restarting will not help)",
    "failed-transient": "FAILED (transient: a restart may help)",
    "ready": "READY (vLLM started and serves requests)",
    "starting": "STARTING (no failure and no progress marker seen)",
    "downloading": "DOWNLOADING (still fetching the model; no failure seen)",
    "loading": "LOADING (still loading the model; no failure seen)",
    "stopped": "STOPPED (the worker stopped vLLM on request)",
}


def to_json(diagnosis: Diagnosis, file: str) -> str:
    data = {"file": file, **diagnosis.to_dict()}
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def to_text(diagnosis: Diagnosis, file: str) -> str:
    lines = [f"{file}: {_VERDICT[str(diagnosis.state)]}"]
    if diagnosis.failed:
        lines += [
            f"  category: {diagnosis.category}",
            f"  rule:     {diagnosis.rule}",
            f"  cause:    {diagnosis.cause}",
            f"  fix:      {diagnosis.fix}",
        ]
        if diagnosis.evidence is not None:
            lines.append(f"  evidence: line {diagnosis.evidence.line}: {diagnosis.evidence.text}")
    return "\n".join(lines)
