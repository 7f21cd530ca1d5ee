"""Score the classifier against a labelled corpus (manifest.jsonl beside the logs).

A log counts as right when the diagnosis agrees with its label: a failure category
must match (``other`` for causes outside the named categories) and so must the state
(permanent or transient) where the manifest gives ``permanent``; ``ok`` must be ready.
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
    permanent: bool | None = None

    @property
    def predicted(self) -> str:
        return self.diagnosis.label or str(self.diagnosis.state)

    @property
    def right(self) -> bool:
        if self.predicted != self.label:
            return False
        return self.permanent is None or self.diagnosis.permanent is self.permanent

    @property
    def failed_called_not_failed(self) -> bool:
        return self.label != "ok" and not self.diagnosis.failed

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
            diagnosis = classify_stream(stream, pack)
        permanent = entry.get("permanent") if entry["category"] != "ok" else None
        results.append(Scored(entry["file"], entry["category"], diagnosis, permanent))
    return results


def summary(results: list[Scored]) -> dict[str, tuple[int, int]]:
    """Per label: (right, total)."""
    total, right = Counter(), Counter()
    for r in results:
        total[r.label] += 1
        right[r.label] += r.right
    return {label: (right[label], total[label]) for label in sorted(total)}
