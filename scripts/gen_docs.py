"""Regenerate the generated parts of docs/ from the code (tests fail when stale).

Usage: python scripts/gen_docs.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

from diagnostics.accuracy import score, summary
from diagnostics.rules import load_pack
from worker.machine import mermaid

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- generated:{name} -->", "<!-- end:{name} -->"


def sections() -> dict[tuple[str, str], str]:
    pack = load_pack()
    rules = ["| priority | id | category | permanent | file |", "|---|---|---|---|---|"]
    for rule in pack.rules:
        rules.append(
            f"| {rule.priority} | `{rule.id}` | {rule.category} "
            f"| {str(rule.permanent).lower()} | {rule.source} |"
        )
    acc = []
    for name in ("corpus", "vllm-0.32"):
        root = ROOT / "fixtures" / name
        if not (root / "manifest.jsonl").exists():
            continue
        results = score(root, pack)
        right = sum(r.right for r in results)
        acc.append(
            f"**fixtures/{name}**: {right}/{len(results)} right "
            f"({100 * right / len(results):.1f} %)\n"
        )
        acc.append("| label | right / total |\n|---|---|")
        acc += [f"| {label} | {ok}/{total} |" for label, (ok, total) in summary(results).items()]
        misses = [r for r in results if not r.right]
        acc.append("")
        acc += [
            f"- miss: `{r.file}` labelled {r.label}, diagnosed {r.predicted} (`{r.diagnosis.rule}`)"
            for r in misses
        ] or ["No misses."]
        acc.append("")
    return {
        ("docs/states.md", "diagram"): "```mermaid\n" + mermaid() + "```",
        ("docs/diagnostics.md", "rules"): "\n".join(rules),
        ("docs/diagnostics.md", "accuracy"): "\n".join(acc).strip(),
    }


def render(text: str, name: str, body: str) -> str:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def main(argv: list[str]) -> int:
    stale = []
    for (file, name), body in sections().items():
        path = ROOT / file
        text = path.read_text(encoding="utf-8")
        new = render(text, name, body)
        if new != text:
            stale.append(f"{file}:{name}")
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if stale and "--check" in argv:
        print("stale: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
