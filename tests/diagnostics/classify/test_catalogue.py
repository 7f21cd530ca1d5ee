"""The catalogue of start-up failure messages mined from vLLM's (and its stack's) sources:
an example built from every catalogued template classifies as catalogued.

The catalogue (fixtures/catalogue/catalogue.jsonl) is produced by
scripts/mine_catalogue.py from the releases' wheels; the category of each message comes
from the data in fixtures/catalogue/assign.yaml. The example puts the message where vLLM
prints it: as the last line of a traceback whose frame is the file that raises it (or as
a logged error line), with every field of the template filled in.
"""

from __future__ import annotations

import json
from pathlib import Path

from diagnostics import Classifier
from tests.support.packs import shipped_pack
from tests.support.scripts import load_script

CATALOGUE = Path(__file__).resolve().parents[3] / "fixtures" / "catalogue" / "catalogue.jsonl"
PACK = shipped_pack()
ENTRIES = [json.loads(line) for line in CATALOGUE.read_text(encoding="utf-8").splitlines()]
CATEGORISED = [e for e in ENTRIES if e.get("category")]
FIELD = "7"  # a field's example value: a number, a word and a path segment at once


def example_lines(entry: dict) -> list[str]:
    message = entry["template"].replace("{}", FIELD)
    site = f"/usr/local/lib/python3.12/site-packages/{entry['file']}"
    if entry["exception"].startswith("logger."):
        return [f"ERROR 01-01 00:00:00 [{Path(entry['file']).name}:1] {message}"]
    exception = entry["exception"]
    if exception == "message":  # a message raised from a variable: the project's error type
        exception = "huggingface_hub.errors.HfHubHTTPError"
    return [
        "Traceback (most recent call last):",
        f'  File "{site}", line 1, in check',
        "    raise error",
        f"{exception}: {message}",
    ]


def test_the_catalogue_is_focused_and_covers_every_source():
    assert 100 <= len(ENTRIES) <= 2000
    assert {e["project"] for e in CATEGORISED} >= {"vllm", "transformers", "huggingface_hub"}
    for entry in ENTRIES:
        assert entry.get("category") or entry.get("generic"), entry


def _miss(entry: dict) -> str | None:
    """What is wrong with the verdict on ``entry``'s example, or None."""
    diagnosis = Classifier(PACK).feed_all(example_lines(entry)).diagnosis()
    if not diagnosis.failed:
        return f"{entry['template']!r}: not a failed start"
    if entry["permanent"] == "evidence" or entry["category"] == "other":
        # "evidence": the rule judges permanence from the numbers. The catalogue's
        # permanence for "other" is the category's old default; the rules judge it by
        # what the image lacks (docs/diagnostics.md, "Permanence follows the image").
        got: object = str(diagnosis.category)
        want: object = entry["category"]
    else:
        got = (str(diagnosis.category), diagnosis.permanent)
        want = (entry["category"], entry["permanent"])
    return None if got == want else f"{entry['template']!r} -> {diagnosis.rule} {got}, not {want}"


# One test per walk, not per template: 1,141 tests cost 1.7 CPU-s of pytest's own work
# per test process that ran them (2026-12-02); a walk reports every template it misses.
def test_every_catalogued_template_classifies_as_catalogued():
    misses = [miss for entry in CATEGORISED if (miss := _miss(entry)) is not None]
    assert not misses, f"{len(misses)} of {len(CATEGORISED)} templates:\n" + "\n".join(misses)


GENERATOR = load_script("gen_catalogue_rules")  # it decides which templates get a pattern


def test_the_generated_catalogue_rules_are_current():
    assert GENERATOR.OUT.read_text(encoding="utf-8") == GENERATOR.render(), (
        "rules/85-catalogue.yaml is not current: python scripts/gen_catalogue_rules.py"
    )


BARE_CONFIG = [
    e
    for e in CATEGORISED
    if GENERATOR.kept(e)
    and e["exception"] != "message"
    and not e["exception"].startswith("logger.")
]


def test_a_config_error_is_bad_config_without_its_frames():
    """A short paste: the exception line alone, and pydantic's form of it."""
    misses = []
    for entry in BARE_CONFIG:
        message = entry["template"].replace("{}", FIELD)
        for line in (f"{entry['exception']}: {message}", f"  Value error, {message}"):
            diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
            if (str(diagnosis.category), diagnosis.permanent) != ("bad_config", True):
                misses.append(f"{line!r} -> {diagnosis.rule}")
    assert len(BARE_CONFIG) > 100
    assert not misses, f"{len(misses)} lines:\n" + "\n".join(misses)
