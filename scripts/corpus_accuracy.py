"""Print the classifier's accuracy on a labelled corpus, per category, and each miss.

Usage: python scripts/corpus_accuracy.py [CORPUS_DIR ...]   (default: the fixtures)

Right means the category and the state (permanent or transient, where the manifest
says) agree with the label.
"""

from __future__ import annotations

import sys
from pathlib import Path

from diagnostics.accuracy import score, summary
from diagnostics.rules import load_pack

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [
        ROOT / "fixtures" / "corpus",
        ROOT / "fixtures" / "vllm-0.32",
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
