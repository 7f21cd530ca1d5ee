"""Regenerate the generated parts of docs/ from the code (tests fail when stale).

Usage: python scripts/gen_docs.py [--check] [--skip SECTION[,SECTION]]
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from diagnostics.command.accuracy import VARIANTS, score, score_variants, spare_cores, summary
from diagnostics.pack.rules import load_pack
from worker.supervision.machine import mermaid

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- generated:{name} -->", "<!-- end:{name} -->"


REAL_SETS = ("corpus", "vllm-0.32", "recorded-container")
# Not real logs (fixtures/reconstructed/README.md): scored as written, no variants, in a
# section of its own ("accuracy-reconstructed"), which its test checks from the one
# scoring it makes (tests/diagnostics/test_reconstructed.py; --check --skip it here).
RECONSTRUCTED = "reconstructed"
AS_WRITTEN = {RECONSTRUCTED}
CATALOGUE = ROOT / "fixtures" / "catalogue"


def _rules_table(pack) -> str:
    rules = ["| priority | id | category | permanent | file |", "|---|---|---|---|---|"]
    for rule in pack.rules:
        permanent = str(rule.permanent).lower()
        if rule.transient_if is not None:
            permanent += " (by evidence)"
        rules.append(
            f"| {rule.priority} | `{rule.id}` | {rule.category} | {permanent} | {rule.source} |"
        )
    return "\n".join(rules)


def _evidence_table(pack) -> str:
    rows = ["| rule | category | transient when | otherwise |", "|---|---|---|---|"]
    for rule in pack.rules:
        if rule.transient_if is not None:
            permanent = "permanent" if rule.permanent else "transient"
            rows.append(
                f"| `{rule.id}` | {rule.category} | `{rule.transient_if.test}` | {permanent} |"
            )
    return "\n".join(rows)


def accuracy_block(name: str, results: list, shaped: list) -> str:
    """The accuracy section of one fixture set, from its scored results (and, for real
    logs, its variants'): pure, so the reconstructed set's test renders it from the one
    scoring it makes."""
    right = sum(r.right for r in results)
    acc = [
        f"**fixtures/{name}**: {right}/{len(results)} right, category and state "
        f"({100 * right / len(results):.1f} %)\n"
    ]
    acc.append("| label | right / total |\n|---|---|")
    acc += [f"| {label} | {ok}/{total} |" for label, (ok, total) in summary(results).items()]
    misses = [r for r in results if not r.right]
    acc.append("")
    acc += [
        f"- miss: `{r.file}` labelled {r.label}, diagnosed {r.predicted} (`{r.diagnosis.rule}`)"
        for r in misses
    ] or ["No misses."]
    if shaped:
        counts = []
        for kind in VARIANTS:
            of_kind = [ok for _, k, ok in shaped if k == kind]
            counts.append(f"{kind} {sum(of_kind)}/{len(of_kind)}")
        acc.append("")
        acc.append("Variants of its failure logs (`--variants`): " + ", ".join(counts) + ".")
    return "\n".join(acc).strip()


def _accuracy(pack, names: tuple[str, ...]) -> str:
    blocks = []
    for name in names:
        root = ROOT / "fixtures" / name
        if not (root / "manifest.jsonl").exists():
            continue
        shaped = score_variants(root, pack) if name not in AS_WRITTEN else []
        # (the reconstructed set, about 30,000 logs, in a process per core, each with the
        # shipped pack; the small real sets here, without the processes' start)
        large = name == RECONSTRUCTED
        results = score(root, processes=spare_cores()) if large else score(root, pack)
        blocks.append(accuracy_block(name, results, shaped))
    return "\n\n".join(blocks)


def _catalogue() -> tuple[str, str]:
    """Coverage per source and version range, and the messages left generic."""
    lines = (CATALOGUE / "catalogue-full.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    sources = json.loads((CATALOGUE / "sources.json").read_text(encoding="utf-8"))
    out = [
        f"{len(entries)} start-up failure messages catalogued out of {sources['mined']} "
        "mined; releases read:",
        "",
    ]
    out += [f"- {project}: {', '.join(v)}" for project, v in sources["releases"].items()]
    out += ["", "| source | catalogued | by category |", "|---|---|---|"]
    by_project: dict[str, Counter] = defaultdict(Counter)
    for e in entries:
        by_project[e["project"]][e.get("category") or "generic"] += 1
    for project, counts in sorted(by_project.items()):
        detail = ", ".join(f"{c} {n}" for c, n in sorted(counts.items()))
        out.append(f"| {project} | {sum(counts.values())} | {detail} |")
    out += ["", "| source | first seen in | catalogued |", "|---|---|---|"]
    spans: Counter = Counter((e["project"], e["first_version"]) for e in entries)
    for (project, version), n in sorted(spans.items(), key=lambda kv: (kv[0][0], _vkey(kv[0][1]))):
        out.append(f"| {project} | {version} | {n} |")
    out += ["", "| source | last seen in | catalogued |", "|---|---|---|"]
    last: Counter = Counter((e["project"], e["last_version"]) for e in entries)
    for (project, version), n in sorted(last.items(), key=lambda kv: (kv[0][0], _vkey(kv[0][1]))):
        out.append(f"| {project} | {version} | {n} |")
    generic = ["| source | message | reason |", "|---|---|---|"]
    for e in entries:
        if e.get("generic"):
            message = e["template"].replace("|", "\\|")[:120]
            generic.append(f"| {e['project']} | `{message}` | {e['generic']} |")
    return "\n".join(out), "\n".join(generic)


def _vkey(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def sections(skip: frozenset[str] = frozenset()) -> dict[tuple[str, str], str]:
    pack = load_pack()
    coverage, generic = _catalogue()
    built = {
        ("docs/states.md", "diagram"): lambda: "```mermaid\n" + mermaid() + "```",
        ("docs/diagnostics.md", "rules"): lambda: _rules_table(pack),
        ("docs/diagnostics.md", "evidence"): lambda: _evidence_table(pack),
        ("docs/diagnostics.md", "accuracy"): lambda: _accuracy(pack, REAL_SETS),
        ("docs/diagnostics.md", "accuracy-reconstructed"): lambda: _accuracy(
            pack, (RECONSTRUCTED,)
        ),
        ("docs/diagnostics.md", "catalogue"): lambda: coverage,
        ("docs/diagnostics.md", "generic"): lambda: generic,
    }
    return {key: make() for key, make in built.items() if key[1] not in skip}


def render(text: str, name: str, body: str) -> str:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def main(argv: list[str]) -> int:
    skip = frozenset(argv[argv.index("--skip") + 1].split(",")) if "--skip" in argv else frozenset()
    stale = []
    for (file, name), body in sections(skip).items():
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
