"""The memory model against fixtures/fit-truth: per row, the predicted and reported
weights per device, KV-cache tokens given the KV memory vLLM reported, and KV-cache
tokens from the GPU's size and gpu_memory_utilization, with their errors; then the
error distribution (median, p90, max of |predicted / reported - 1|) for the calibration
rows and the held-out rows separately, and the rows the model cannot explain.

The rows go through ``worker.preflight.estimate.estimate`` with the same inputs and
exclusions as tests/worker/preflight/test_fit_table.py. Not a test: run by hand,
``.venv/bin/python bench/fit_table.py [--fixtures DIR]``; prints Markdown.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.worker.preflight.test_fit_table import (  # noqa: E402
    FIXTURES,
    KV_GIVEN,
    KV_GPU,
    TARGETS,
    WEIGHTS,
    exclusions,
    observed,
    predict,
    rows_and_models,
)

# Rows kept out of the calibration, measured once blind (fixtures/fit-truth/README.md).
HELD_OUT = {"R01", "R05", "R06", "R08", "R10", "R17", "R18", "R20", "R25", "R27"}
LABELS = {WEIGHTS: "weights GiB", KV_GIVEN: "KV tokens given memory", KV_GPU: "KV tokens from GPU"}


def _cell(target: str, pred: float | None, truth: float | None) -> str:
    if pred is None or truth is None:
        return "—"
    err = pred / truth - 1
    if target == WEIGHTS:
        return f"{pred:.3f} / {truth:.3f} ({err:+.1%})"
    return f"{pred:,.0f} / {truth:,.0f} ({err:+.1%})"


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def run(directory: Path) -> str:
    rows, models = rows_and_models(directory)
    errs: dict[tuple[str, str], list[float]] = {}
    lines = [
        "| row | set | engine | "
        + " | ".join(LABELS[t] + " (pred / vLLM)" for t in TARGETS)
        + " |",
        "|---|---|---|---|---|---|",
    ]
    skipped: list[str] = []
    for row in rows:
        rid = row["row_id"]
        group = "held-out" if rid in HELD_OUT else "calibration"
        why = exclusions(row, models)
        cells = []
        for target in TARGETS:
            truth = observed(row, target)
            if target in why:
                cells.append(
                    "— (excluded)" if truth is None else _excluded(row, target, truth, models)
                )
                skipped.append(f"- {rid} {LABELS[target]}: {why[target]}")
                continue
            pred = predict(row, target, models)
            assert truth is not None
            errs.setdefault((group, target), []).append(abs(pred / truth - 1))
            cells.append(_cell(target, pred, truth))
        version = (row.get("vllm_version") or "?").split("+")[0].split(".dev")[0]
        lines.append(f"| {rid} | {group} | {row['engine']} {version} | " + " | ".join(cells) + " |")
    lines += ["", "| set | target | rows | median | p90 | max |", "|---|---|---|---|---|---|"]
    for group in ("calibration", "held-out"):
        for target in TARGETS:
            values = errs.get((group, target), [])
            if values:
                lines.append(
                    f"| {group} | {LABELS[target]} | {len(values)} | {statistics.median(values):.2%} "
                    f"| {_p90(values):.2%} | {max(values):.2%} |"
                )
    lines += ["", "Not asserted (the reason):", *skipped]
    return "\n".join(lines)


def _excluded(row: dict, target: str, truth: float, models: dict) -> str:
    try:
        return _cell(target, predict(row, target, models), truth) + " (excluded)"
    except ValueError:
        return "— (excluded)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    args = parser.parse_args()
    print(run(args.fixtures))


if __name__ == "__main__":
    main()
