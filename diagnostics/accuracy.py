"""Score the classifier against a labelled corpus (manifest.jsonl beside the logs).

A log counts as right when the diagnosis agrees with its label: a failure category
must match (``other`` for causes outside the named categories); ``ok`` must be ready.
Used by tests, by ``scripts/corpus_accuracy.py`` and for docs.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from diagnostics.model import Diagnosis
from diagnostics.rules import RulePack
from diagnostics.scan import classify_stream


@dataclass(frozen=True)
class Scored:
    file: str
    label: str
    diagnosis: Diagnosis

    @property
    def predicted(self) -> str:
        return self.diagnosis.label or str(self.diagnosis.state)

    @property
    def right(self) -> bool:
        return self.predicted == self.label

    @property
    def transient_called_permanent(self) -> bool:
        return self.label in ("cuda_fault", "network") and self.diagnosis.permanent is True


def load_manifest(root: Path) -> list[dict]:
    with (root / "manifest.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def score(root: Path, pack: RulePack) -> list[Scored]:
    results = []
    for entry in load_manifest(root):
        with (root / entry["file"]).open("rb") as stream:
            results.append(Scored(entry["file"], entry["category"], classify_stream(stream, pack)))
    return results


def summary(results: list[Scored]) -> dict[str, tuple[int, int]]:
    """Per label: (right, total)."""
    total, right = Counter(), Counter()
    for r in results:
        total[r.label] += 1
        right[r.label] += r.right
    return {label: (right[label], total[label]) for label in sorted(total)}
