"""Print the classifier's accuracy on a labelled corpus, per category, and each miss.

Usage: python scripts/corpus_accuracy.py [--variants] [--tails] [CORPUS_DIR ...]
(default: the fixtures)

``--variants`` also scores held-out-style variants of every failure log (the root-cause
line alone, an elided window around the root cause, a paste cut right after it,
hard-wrapped at 80 and 120 columns, Windows line ends, quoted with "> ", indented, CRI
and docker JSON lines). ``--tails`` scores the last 5, 10 and 20 lines of
every failure log (a paste of the end only, often without the root cause): how many are
judged failed at all, how many right, and that none of a transient category is permanent.

Right means the category and the state (permanent or transient, where the manifest
says) agree with the label.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from diagnostics.command.accuracy import (
    VARIANTS,
    Scored,
    load_manifest,
    score,
    score_variants,
    summary,
)
from diagnostics.pack.rules import RulePack, load_pack
from diagnostics.scanning.scan import classify_stream

ROOT = Path(__file__).resolve().parent.parent


TAILS = (5, 10, 20)


def score_tails(root: Path, pack: RulePack) -> list[tuple[str, int, Scored]]:
    """(file, lines, scored) for the last lines of every failure log."""
    results = []
    for entry in load_manifest(root):
        if entry["category"] == "ok":
            continue
        lines = (root / entry["file"]).read_bytes().split(b"\n")
        while lines and not lines[-1].strip():
            lines.pop()
        for count in TAILS:
            data = b"\n".join(lines[-count:])
            diagnosis = classify_stream(io.BytesIO(data), pack)
            scored = Scored(entry["file"], entry["category"], diagnosis, entry.get("permanent"))
            results.append((entry["file"], count, scored))
    return results


def print_tails(root: Path, pack: RulePack) -> None:
    tails = score_tails(root, pack)
    for count in TAILS:
        of = [s for _, c, s in tails if c == count]
        failed = sum(not s.failed_called_not_failed for s in of)
        right = sum(s.right for s in of)
        permanent = sum(s.transient_called_permanent for s in of)
        print(
            f"  tail {count:2} lines: {failed}/{len(of)} failed, {right}/{len(of)} right, "
            f"transient called permanent {permanent}"
        )
    for file, count, s in tails:
        if s.failed_called_not_failed or s.transient_called_permanent:
            print(f"  TAIL MISS {count} {file}: {s.predicted} (permanent {s.diagnosis.permanent})")


def main(argv: list[str]) -> int:
    with_variants = "--variants" in argv
    with_tails = "--tails" in argv
    roots = [Path(a) for a in argv if a not in ("--variants", "--tails")] or [
        ROOT / "fixtures" / "corpus",
        ROOT / "fixtures" / "vllm-0.32",
        ROOT / "fixtures" / "recorded-container",
    ]
    pack = load_pack()
    for root in roots:
        if not (root / "manifest.jsonl").exists():
            continue
        results = score(root, pack)
        right = sum(r.right for r in results)
        wrong_state = sum(r.transient_called_permanent for r in results)
        not_failed = sum(r.failed_called_not_failed for r in results)
        print(
            f"## {root.name}: {right}/{len(results)} right category and state "
            f"({100 * right / len(results):.1f} %); cuda_fault/network called permanent: "
            f"{wrong_state}; failed logs called not failed: {not_failed}"
        )
        for label, (ok, total) in summary(results).items():
            print(f"  {label:18} {ok}/{total}")
        for r in results:
            if not r.right:
                d = r.diagnosis
                ev = d.evidence.text[:150] if d.evidence else ""
                state = "" if r.permanent is None else f" (permanent {r.permanent})"
                print(
                    f"  MISS {r.file}: label {r.label}{state}, got {r.predicted} "
                    f"(permanent {d.permanent}, {d.rule}) {ev}"
                )
            if r.transient_called_permanent:
                print(f"  TRANSIENT CALLED PERMANENT: {r.file}")
        if with_variants:
            shaped = score_variants(root, pack)
            for kind in VARIANTS:
                of_kind = [ok for _, k, ok in shaped if k == kind]
                print(f"  variant {kind:8} {sum(of_kind)}/{len(of_kind)} right")
            for file, kind, ok in shaped:
                if not ok:
                    print(f"  VARIANT MISS {kind} {file}")
        if with_tails:
            print_tails(root, pack)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
