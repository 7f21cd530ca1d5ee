"""Adversarial lines through the normaliser, the classifier and the redactor.

Two guarantees:

* **Nothing breaks**: hypothesis builds lines from the pieces that steer the code (rule
  pack words, escape sequences, prefixes, secret shapes, carriage returns) and the
  classifier, normaliser and redactor take each one without an error and with sane
  results.
* **Linear time**: every step over a line costs time proportional to its length, for
  every rule of the pack. Each adversarial construction (a pack pattern's words repeated,
  unterminated escapes, prefixes and secret keys repeated...) is run at n and 4n
  characters; a quadratic step would take 16x as long at 4n (the reviewed one took 31 s
  on 166 KB). The check fails only when the 4n run is both more than 10x the n run and
  longer than a generous absolute budget, so a loaded machine cannot make it flaky.

The figures (lines fuzzed, the slowest throughput seen) go to docs/reliability.md.
"""

from __future__ import annotations

import re
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnostics.classify.classifier import Classifier
from diagnostics.classify.normalize import normalize
from diagnostics.redaction.redact import redact, safe_cut
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
SMALL, LARGE = 16 * 1024, 64 * 1024
QUICK_EVERY = 6
BUDGET_S = 0.25  # for LARGE characters: 4 us per character, ~50x what linear work takes


def _pack_words() -> list[str]:
    """Literal runs of the pack's patterns: the text that makes a pattern start to match."""
    words: set[str] = set()
    for pattern in PACK.patterns:
        for run in re.split(r"\\.|[()\[\]{}?*+|^$.]", pattern.regex.pattern):
            if len(run.strip()) >= 3:
                words.add(run)
    return sorted(words)


WORDS = _pack_words()
STEERING = [
    "\x1b[",
    "\x1b[31m",
    "\x1b]",
    "\x1b]8;;",
    "\x07",
    "\x1b",
    "[0;36m",
    "\r",
    "\\n",
    "(EngineCore_DP0 pid=12) ",
    "[rank0]: ",
    "INFO 05-01 10:00:00 [core.py:1] ",
    "ERROR ",
    "2024-05-01T10:00:00Z ",
    "abcdefghijkl0123[info]",
    "Traceback (most recent call last):",
    "hf_",
    "hf_AAAAAAAAAAAAAAAAAAAAAAAA",
    "Bearer ",
    "Authorization: ",
    "https://",
    "user:pass@",
    "password=",
    "X-Api-Key: ",
    "--hf-token ",
    "'api_key': ['",
    "A_",
    "_TOKEN=",
    " ",
    "'",
    '"',
    "=",
    ":",
    "@",
]
PIECES = st.one_of(st.sampled_from(WORDS), st.sampled_from(STEERING), st.text(max_size=8))
LINES = st.lists(PIECES, max_size=40).map("".join)
_STATS = {"lines": 0, "chars": 0, "worst_chars_per_s": float("inf"), "worst_case": ""}


@settings(
    max_examples=tiers.examples(250),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(lines=st.lists(LINES, min_size=1, max_size=8))
def test_generated_lines_never_break_the_pipeline(lines):
    classifier = Classifier(PACK)
    for line in lines:
        classifier.feed(line)
        text = normalize(line)
        assert len(text) <= len(line) + 1
        assert "\x1b" not in text
        once = redact(line)
        assert redact(once) == once  # redaction is stable
        assert 0 <= safe_cut(line, max(1, len(line) // 2), 64) <= len(line)
    diagnosis = classifier.diagnosis(exited=True)
    assert diagnosis.failed
    assert len(classifier.tail()) == len(lines)
    _STATS["lines"] += len(lines)
    _STATS["chars"] += sum(map(len, lines))


def _constructions() -> dict[str, str]:
    """Unit strings that, repeated, are the worst inputs we know for each step."""
    units = {
        "unterminated OSC": "\x1b]",
        "CSI starts": "\x1b[1;",
        "lost-ESC colour": "[0;3",
        "carriage returns": "a\r",
        "prefix repeats": "(EngineCore_DP0 pid=12) [rank0]: ",
        "timestamp repeats": "2024-05-01T10:00:00.000 ",
        "spaces": " ",
        "hf_ starts": "hf_",
        "short hf_ tokens": "hf_abcdefghijklmnopqrs ",
        "bearer words": "Bearer ",
        "URL starts": "a://b",
        "URL userinfo": "https://u:p",
        "key prefixes": "A_",
        "key words": "api_key_",
        "open keys": "password=",
        "flags": "--hf-token-",
        "quotes": "'token': '",
        "traceback": "Traceback (most recent call last):",
    }
    # (the quick run, tests/support/tiers.py: every QUICK_EVERY-th pattern's; the full
    # run: every pattern's)
    for pattern in tiers.sample(PACK.patterns, QUICK_EVERY):
        # The longest literal run of each pattern: where a match attempt goes furthest.
        runs = re.split(r"\\.|[()\[\]{}?*+|^$.]", pattern.regex.pattern)
        run = max(runs, key=len)
        if len(run.strip()) >= 3:
            units[f"pack word {run!r}"] = run
    return units


def _cost(unit: str, size: int) -> float:
    line = (unit * (size // len(unit) + 1))[:size]
    start = time.process_time()
    classifier = Classifier(PACK)
    classifier.feed(line)
    classifier.feed(line[::-1])
    classifier.diagnosis(exited=True)
    classifier.tail()
    redact(line)
    normalize(line)
    safe_cut(line, size // 2, 65536)
    return time.process_time() - start


def test_every_step_is_linear_in_the_line_length(reliability):
    slow = []
    worst = float("inf")
    constructions = _constructions()
    for name, unit in constructions.items():
        small = _cost(unit, SMALL)
        large = _cost(unit, LARGE)
        if large > max(BUDGET_S, 10 * small):
            large = _cost(unit, LARGE)  # measured twice before it counts
            if large > max(BUDGET_S, 10 * small):
                slow.append(f"{name}: {small:.3f} s at {SMALL}, {large:.3f} s at {LARGE}")
        rate = 2 * LARGE / max(large, 1e-6)  # the line and its reverse
        if rate < worst:
            worst, _STATS["worst_case"] = rate, name
    assert not slow, slow
    _STATS["worst_chars_per_s"] = worst
    lines = _STATS["lines"] + 2 * len(constructions)
    reliability(
        "adversarial lines (hypothesis: pack words, escapes, prefixes, secret shapes, CRs; "
        f"and {len(constructions)} worst-case constructions at 16 and 64 K characters) through "
        "the normaliser, classifier and redactor",
        "no error; linear time",
        f"{lines:,} lines fuzzed, none failed; every step linear (4x the length, under 10x "
        f"the time); slowest {worst / 1e6:.1f} M characters/s ({_STATS['worst_case']})",
        requires=("test_generated_lines_never_break_the_pipeline",),
    )


def test_exception_lines_full_of_the_config_rules_words_are_linear():
    """The review found two config rules ("does not support ... use", "only ... supported")
    backtracking for 31 s on a 166 KB exception line in Python's re. Lines made of those
    words without the word that completes a match: RE2 reads each once."""
    for unit in ("does not support x ", "only a b c d e f g "):
        small = _cost_line("ValueError: " + unit * (SMALL // len(unit)))
        large = _cost_line("ValueError: " + unit * (LARGE // len(unit)))
        assert large <= max(BUDGET_S, 10 * small), (unit, small, large)


def _cost_line(line: str) -> float:
    start = time.process_time()
    classifier = Classifier(PACK)
    classifier.feed(line)
    classifier.diagnosis(exited=True)
    return time.process_time() - start
