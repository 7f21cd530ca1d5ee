"""Score the classifier against a labelled corpus (manifest.jsonl beside the logs).

A log counts as right when the diagnosis agrees with its label: a failure category
must match (``other`` for causes outside the named categories) and so must the state
(permanent or transient) where the manifest gives ``permanent``; ``ok`` must be ready.
Used by tests, by ``scripts/corpus_accuracy.py`` and for docs.
"""

from __future__ import annotations

import functools
import io
import json
import multiprocessing
import os
from collections import Counter
from collections.abc import Collection
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from diagnostics.classify.normalize import strip_ansi
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack, load_pack
from diagnostics.scanning.scan import classify_stream

# Labels of a start that did not fail: up ("ok"), or still under way when the log ends
# (a held-out writer's "still loading", labelled by the state it names).
UNDER_WAY = frozenset({"ok", "starting", "downloading", "loading", "under-way"})
# A label for a start under way whose phase the writer did not name (``"state":
# "starting"`` beside ``"category": "ok"``): any phase before ready is right.
PHASES_BEFORE_READY = frozenset({"starting", "downloading", "loading"})


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
        if self.label == "under-way":
            return self.predicted in PHASES_BEFORE_READY
        if self.predicted != self.label:
            return False
        return self.permanent is None or self.diagnosis.permanent is self.permanent

    @property
    def failed_called_not_failed(self) -> bool:
        return self.label not in UNDER_WAY and not self.diagnosis.failed

    @property
    def transient_called_permanent(self) -> bool:
        return self.label in ("cuda_fault", "network") and self.diagnosis.permanent is True


def load_manifest(root: Path) -> list[dict]:
    with (root / "manifest.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def spare_cores(limit: int = 4) -> int:
    """The processes to score a large set in: one per core this process may run on, at
    most ``limit`` (each loads the pack: more than a few cost more than they save)."""
    return min(limit, len(os.sched_getaffinity(0)))


def score(
    root: Path,
    pack: RulePack | None = None,
    processes: int = 1,
    only: Collection[str] | None = None,
) -> list[Scored]:
    """Every log of ``root``'s manifest (those whose file is in ``only``, when given)
    diagnosed with ``pack`` (the shipped pack when None), in the manifest's order.
    ``processes`` > 1 splits the logs among that many fresh processes, each loading the
    shipped pack (a pack given here cannot travel)."""
    entries = load_manifest(root)
    if only is not None:
        entries = [entry for entry in entries if entry["file"] in only]
    if processes <= 1:
        used = pack if pack is not None else _shipped()
        return [_scored(root, entry, used) for entry in entries]
    if pack is not None:
        raise ValueError("scoring in several processes reads with the shipped pack only")
    context = multiprocessing.get_context("spawn")  # (no thread of the caller's goes along)
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        step = -(-len(entries) // (processes * 8)) or 1
        chunks = [entries[i : i + step] for i in range(0, len(entries), step)]
        parts = pool.map(_scored_with_shipped, [root] * len(chunks), chunks)
        return [scored for part in parts for scored in part]


def _scored_with_shipped(root: Path, entries: list[dict]) -> list[Scored]:
    pack = _shipped()
    return [_scored(root, entry, pack) for entry in entries]


@functools.cache
def _shipped() -> RulePack:
    return load_pack()


def _scored(root: Path, entry: dict, pack: RulePack) -> Scored:
    with (root / entry["file"]).open("rb") as stream:
        diagnosis = classify_stream(stream, pack)
    label = entry["category"]
    if label == "ok" and entry.get("state") == "starting":
        label = "under-way"
    permanent = entry.get("permanent") if label not in UNDER_WAY else None
    return Scored(entry["file"], label, diagnosis, permanent)


def summary(results: list[Scored]) -> dict[str, tuple[int, int]]:
    """Per label: (right, total)."""
    total: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for r in results:
        total[r.label] += 1
        right[r.label] += r.right
    return {label: (right[label], total[label]) for label in sorted(total)}


# Held-out-style variants of a labelled log: the shapes pastes take. Each keeps the
# labelled root-cause line, so the verdict should not change.
VARIANTS = (
    "line",
    "window",
    "cut",
    "wrap80",
    "wrap120",
    "crlf",
    "quoted",
    "indented",
    "cri",
    "docker-json",
)


def variant(lines: list[str], cause_at: int, kind: str) -> list[str]:
    """``lines`` shaped as ``kind``; ``cause_at`` is the index of the root-cause line."""
    if kind == "line":  # a paste of the cause's line alone
        return lines[cause_at : cause_at + 1]
    if kind == "window":  # an elided paste: a few lines around the cause
        return lines[max(0, cause_at - 5) : cause_at + 10]
    if kind == "cut":  # the paste stops right after the cause
        return lines[: cause_at + 1]
    if kind.startswith("wrap"):  # cut at a terminal's width, counted on what it shows
        width = int(kind[4:])
        shown = [strip_ansi(line).rstrip("\r") for line in lines]
        return [line[i : i + width] for line in shown for i in range(0, len(line) or 1, width)]
    if kind == "crlf":
        return [line + "\r" for line in lines]
    if kind == "quoted":
        return [f"> {line}" for line in lines]
    if kind == "indented":  # a Markdown code block
        return [f"    {line}" for line in lines]
    if kind == "cri":  # a container runtime's log file (Kubernetes nodes)
        return [f"2024-05-01T12:00:00.123456789Z stderr F {line}" for line in lines]
    if kind == "docker-json":  # docker's json-file log driver
        return [json.dumps({"log": f"{line}\n", "stream": "stderr"}) for line in lines]
    raise ValueError(kind)


def score_variants(root: Path, pack: RulePack) -> list[tuple[str, str, bool]]:
    """(file, variant, right) for every failure log whose root-cause line is found."""
    results = []
    for entry in load_manifest(root):
        if entry["category"] in UNDER_WAY or not entry.get("root_cause_line"):
            continue
        raw = (root / entry["file"]).read_bytes().decode("utf-8", "replace")
        lines = raw.split("\n")
        try:
            cause_at = lines.index(entry["root_cause_line"])
        except ValueError:
            continue
        permanent = entry.get("permanent")
        for kind in VARIANTS:
            data = "\n".join(variant(lines, cause_at, kind)).encode("utf-8")
            diagnosis = classify_stream(io.BytesIO(data), pack)
            scored = Scored(entry["file"], entry["category"], diagnosis, permanent)
            results.append((entry["file"], kind, scored.right))
    return results
