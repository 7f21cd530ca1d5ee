"""Every catalogued message (``rules/catalogue.json``, from the complete catalogue) is read
with its category however it is printed: whole as an exception line, cut by the paste,
hard-wrapped with the process prefix on the continuation, and inside each wrapper
(pydantic's two forms, vLLM 0.5's worker report, Ray's task error, a CLI's ``Error:``).

Where a specific rule of the pack names the message (kind ``cause``), the rule decides
(docs/diagnostics.md, "The catalogue": the module table decides unless a rule says
better); a cut text that another template reads at least as well is that template's.
The wrappers are read by the classifier's normaliser and the lookup (the examples go
through both, without the hyperscan pass, which a sample checks end to end).
"""

from __future__ import annotations

import io
import json
import re

import pytest

from diagnostics import Classifier
from diagnostics.classify.normalize import normalize
from diagnostics.classify.wrapping import MAX_WRAPPED_PARTS
from diagnostics.model import Category
from diagnostics.pack.catalogue import (
    FORMAT,
    MIN_CUT,
    MIN_ENDING,
    MIN_REWORDED,
    Entry,
    Found,
    load_catalogue,
    parse_catalogue,
    row_of,
)
from diagnostics.scanning.scan import classify_stream
from tests.support import tiers
from tests.support.packs import shipped_pack
from tests.support.scripts import load_script

PACK = shipped_pack()
CATALOGUE = load_catalogue()
FIELD = "7"  # a field's example value: a number, a word and a path segment at once
ROWS = [row for row in CATALOGUE.rows if row[1] != "other"]
# The quick run (tests/support/tiers.py) walks every QUICK_EVERY-th row; the full run
# walks every row. Counts the tests expect scale with SHARE.
QUICK_EVERY = 5
WALKED = tiers.sample(ROWS, QUICK_EVERY)
SHARE = len(WALKED) / len(ROWS)
PREFIX = "(EngineCore_DP0 pid=12) "
TRACEBACK_HEAD = "Traceback (most recent call last):"


def _example(template: str) -> str:
    """The message with every field filled; a leading field with a word (a number there
    would read as a pasted line number)."""
    if template.startswith("{}"):
        template = "layer" + template
    return template.replace("{}", FIELD)


def _exception(row) -> str:
    name = row[3]
    return "RuntimeError" if name.startswith("logger.") or name == "message" else name


WRAPPERS = {
    "exception line": lambda row, m: f"{_exception(row)}: {m}",
    "pydantic": lambda row, m: f"  Value error, {m} [type=value_error, input_value={{}}]",
    "pydantic v1": lambda row, m: f"  {m} (type=value_error)",
    "worker report": lambda row, m: (
        "(VllmWorkerProcess pid=9) ERROR 01-01 00:00:00 multiproc_worker_utils.py:226] "
        f"Exception in worker VllmWorkerProcess while processing method load_model: {m}, "
        "Traceback (most recent call last):"
    ),
    "ray": lambda row, m: f"ray.exceptions.RayTaskError({_exception(row)}): {m}",
    "cli": lambda row, m: f"Error: {m}",
    # vLLM 0.6's engine logs the exception as its repr
    "repr": lambda row, m: f"ERROR 01-01 00:00:00 engine.py:157] {_exception(row)}({_quoted(m)})",
}


def _catalogue_of(*rows):
    """A catalogue of ``rows`` as ``catalogue.json`` holds them."""
    return parse_catalogue(json.dumps({"format": FORMAT, "entries": list(rows)}).encode())


def _quoted(message: str) -> str:
    quote = '"' if "'" in message else "'"
    return f"{quote}{message}{quote}"


def _decided_by_rule(lines: list[str]) -> bool:
    diagnosis = Classifier(PACK).feed_all(lines).diagnosis()
    rule = next((r for r in PACK.rules if r.id == diagnosis.rule), None)
    return rule is not None and rule.kind == "cause"


def _misread(row, found: Found | None, cut: bool) -> bool:
    if found is not None and str(found.entry.category) == row[1]:
        return False
    # A cut text another template reads at least as well is that template's.
    return not (cut and found is not None and found.entry.template != row[0])


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_every_message_is_read_inside_each_wrapper(wrapper):
    form = WRAPPERS[wrapper]
    wrong = []
    for row in WALKED:
        line = form(row, _example(row[0]))
        if _misread(row, CATALOGUE.lookup(normalize(line)), cut=False) and not _decided_by_rule(
            [line]
        ):
            wrong.append(row[0])
    assert not wrong, f"{len(wrong)} of {len(WALKED)} misread, e.g. {wrong[:5]}"


def test_every_message_cut_by_the_paste_is_read():
    """Cut after two thirds of it, at least MIN_CUT + 10 characters."""
    wrong, said_nothing, cut_ones = [], 0, 0
    for row in WALKED:
        message = _example(row[0])
        if len(message) < MIN_CUT + 20:
            continue
        cut_ones += 1
        line = f"{_exception(row)}: {message[: max(MIN_CUT + 10, len(message) * 2 // 3)]}"
        found = CATALOGUE.lookup(normalize(line))
        if found is None:
            said_nothing += 1  # an ambiguous beginning says nothing (the rules decide)
        elif _misread(row, found, cut=True) and not _decided_by_rule([line]):
            wrong.append(row[0])
    assert not wrong, f"{len(wrong)} of {cut_ones} misread, e.g. {wrong[:5]}"
    assert said_nothing <= cut_ones // 50, said_nothing  # at most 2 % ambiguous


def test_every_message_wrapped_with_the_process_prefix_is_read():
    """Hard-wrapped at 120 columns of message, the continuation under the same prefix,
    end to end through the classifier: the verdict of the line unwrapped."""
    wrong, wrapped = [], 0
    for row in WALKED:
        body = f"{_exception(row)}: {_example(row[0])}"
        if len(body) < 140:
            continue
        wrapped += 1
        whole = Classifier(PACK).feed_all([PREFIX + body]).diagnosis()
        lines = [PREFIX + body[:120], PREFIX + body[120:]]
        cut = Classifier(PACK).feed_all(lines).diagnosis()
        if (cut.category, cut.permanent) != (whole.category, whole.permanent):
            wrong.append((row[0], whole.rule, cut.rule))
    assert wrapped > 300 * SHARE
    assert not wrong, f"{len(wrong)} of {wrapped} misread, e.g. {wrong[:5]}"


@pytest.mark.parametrize("prefix", ["", PREFIX], ids=["no prefix", "process prefix"])
@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_a_sample_inside_each_wrapper_cut_at_80_columns_is_read(wrapper, prefix):
    """Every 9th message in each wrapper, cut by a terminal into parts of 80 columns
    (each under the prefix), read as a file: the verdict of the line unwrapped. A cut
    falls anywhere: after a space (kept: the parts are joined as printed), inside the
    wrapper's head (its first part alone reads as a bare exception line). Known limits,
    left out: a message with a character beyond ASCII (the block scanner measures a
    line's width in bytes), a part that begins with a number and a colon (read as a
    pasted line number, which the normaliser removes) or with ">" (read as a Markdown
    quote marker, removed too)."""
    form = WRAPPERS[wrapper]
    wrong, wrapped = [], 0
    for row in tiers.sample(ROWS[::9], QUICK_EVERY):
        text = form(row, _example(row[0]))
        parts = [text[i : i + 80] for i in range(0, len(text), 80)]
        if not 1 < len(parts) <= MAX_WRAPPED_PARTS or not text.isascii():
            continue
        if any(re.match(r"\s*\d+: |>", part) for part in parts[1:]):
            continue
        wrapped += 1
        whole = Classifier(PACK).feed_all([prefix + text]).diagnosis()
        lines = [prefix + part for part in parts]
        cut = classify_stream(io.BytesIO("\n".join([TRACEBACK_HEAD, *lines]).encode()), PACK)
        if (cut.category, cut.permanent) != (whole.category, whole.permanent):
            wrong.append((row[0], whole.rule, cut.rule))
    assert wrapped > 40 * SHARE
    assert not wrong, f"{len(wrong)} of {wrapped} misread, e.g. {wrong[:5]}"


def test_a_message_cut_after_a_space_over_four_parts_or_more_is_read():
    """The continuation lines kept with the evidence run on while the line before each is
    cut at a terminal's width, that line's trailing spaces counted (the evidence is kept
    without them): every message in the exception-line, Ray and CLI wrappers whose first
    80-column part ends in a space and that takes 4 to 10 parts."""
    wrong, cut_ones = [], 0
    for wrapper in ("exception line", "ray", "cli"):
        for row in WALKED:
            text = WRAPPERS[wrapper](row, _example(row[0]))
            parts = [text[i : i + 80] for i in range(0, len(text), 80)]
            if not 4 <= len(parts) <= MAX_WRAPPED_PARTS or not parts[0].endswith(" "):
                continue
            cut_ones += 1
            whole = Classifier(PACK).feed_all([text]).diagnosis()
            cut = Classifier(PACK).feed_all(parts).diagnosis()
            if (cut.category, cut.permanent) != (whole.category, whole.permanent):
                wrong.append((wrapper, row[0], whole.rule, cut.rule))
    assert cut_ones > 50 * SHARE
    assert not wrong, f"{len(wrong)} of {cut_ones} misread, e.g. {wrong[:5]}"


@pytest.mark.parametrize("wrapper", ["pydantic", "pydantic v1"])
def test_a_message_hard_wrapped_at_80_columns_inside_a_trailing_wrapper_is_read(wrapper):
    """pydantic's wrappers end the message with their mark (``[type=value_error``, ``(type=
    value_error)``): cut by a terminal into lines of 80 columns with no prefix, the last
    part alone matches the wrapper's generic rule (bad_config) too, and the message read
    whole must win over that part: the verdict is the one on the line unwrapped. Every
    message of another category long enough to take three lines."""
    form = WRAPPERS[wrapper]
    wrong, wrapped = [], 0
    for row in WALKED:
        text = form(row, _example(row[0]))
        if row[1] == "bad_config" or not 160 < len(text) <= 80 * MAX_WRAPPED_PARTS:
            continue
        wrapped += 1
        whole = Classifier(PACK).feed_all([text]).diagnosis()
        lines = [text[i : i + 80] for i in range(0, len(text), 80)]
        cut = Classifier(PACK).feed_all(lines).diagnosis()
        if (cut.category, cut.permanent) != (whole.category, whole.permanent):
            wrong.append((row[0], whole.rule, cut.rule))
    assert wrapped > 200 * SHARE
    assert not wrong, f"{len(wrong)} of {wrapped} misread, e.g. {wrong[:5]}"


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_a_sample_inside_each_wrapper_end_to_end(wrapper):
    """Every 25th message through the whole classifier (prefilter, rules, verdict)."""
    form = WRAPPERS[wrapper]
    for row in tiers.sample(ROWS[::25], QUICK_EVERY):
        line = form(row, _example(row[0]))
        diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
        assert diagnosis.failed, line
        if str(diagnosis.category) != row[1]:
            assert _decided_by_rule([line]) or _misread(row, None, cut=False), line


def test_the_lookup_reads_a_cut_message_only_where_the_template_would_go_on():
    template = (
        "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache "
        "is needed, which is larger than the available KV cache memory ({} GiB)."
    )
    row = row_of(template, "kv_cache", True, "ValueError", "vllm/v1/core/x.py", "check")
    catalogue = _catalogue_of(row)
    cut = "ValueError: To serve at least one request with the model's max seq len (100), (4.2 GiB KV cach"
    found = catalogue.lookup(cut)
    assert found is not None and not found.whole and found.entry.category is Category.KV_CACHE
    # The text goes on with something else: not this message.
    other = (
        "ValueError: To serve at least one request with the model's max seq len (100), then stop"
    )
    assert catalogue.lookup(other) is None
    # Too little of it shown.
    assert catalogue.lookup("ValueError: To serve at least one") is None
    whole = cut + "e is needed, which is larger than the available KV cache memory (4.1 GiB). More."
    found = catalogue.lookup(whole)
    assert found is not None and found.whole


def test_every_message_that_lost_its_start_is_read():
    """A line that begins inside the message (a screenshot cropped, a quote begun
    mid-line): every message whose fixed text runs to MIN_ENDING + 20 characters, shown
    from a third of the way in (in the middle of a word where one is there), at least
    MIN_ENDING + 10 fixed characters, to its end; a text another template reads at least
    as well is that template's, and at most 2 % say nothing (an ambiguous ending)."""
    wrong, said_nothing, cut_ones = [], 0, 0
    for row in WALKED:
        message = _example(row[0])
        fixed = len(row[0].replace("{}", ""))
        if fixed < MIN_ENDING + 20:
            continue
        cut_ones += 1
        fields = row[0].count("{}") * len(FIELD)
        start = min(len(message) // 3, len(message) - (MIN_ENDING + 10 + fields))
        start += 1 if message[start : start + 2].isalpha() else 0  # inside a word
        found = CATALOGUE.lookup_ending(message[start:])
        if found is None:
            said_nothing += 1
        elif _misread(row, found, cut=True):
            wrong.append((row[0], message[start:]))
    assert cut_ones > 2000 * SHARE
    assert not wrong, f"{len(wrong)} of {cut_ones} misread, e.g. {wrong[:3]}"
    assert said_nothing <= cut_ones // 50, said_nothing


def test_the_lookup_reads_a_message_that_lost_its_start_only_to_its_end():
    template = (
        "User-specified max_model_len ({}) is greater than the derived max_model_len "
        "({}={} or model_max_length={} in model's config.json). This may lead to incorrect "
        "model outputs or CUDA errors."
    )
    row = row_of(template, "bad_config", True, "ValueError", "vllm/config.py", "get")
    catalogue = _catalogue_of(row)
    ending = (
        "ength (65536) is greater than the derived max_model_len (max_position_embeddings="
        "32768 or model_max_length=None in model's config.json). This may lead to incorrect "
        "model outputs or CUDA errors. To allow overriding this maximum, set the env var"
    )
    found = catalogue.lookup_ending(ending)
    assert found is not None and not found.whole and found.entry.category is Category.BAD_CONFIG
    # begun inside a field's value, or at a piece's first character: read too
    assert catalogue.lookup_ending(ending[ending.index("536) ") :]) is not None
    assert catalogue.lookup_ending(ending[ending.index(") is") :]) is not None
    # what comes before the message's remains is not its opening: another message
    assert catalogue.lookup_ending("The config said " + ending) is None
    # cut at its end too: not read (a text cut at both ends names too little)
    assert catalogue.lookup_ending(ending[: ending.index(" This may")]) is None
    # too little of its end shown
    assert catalogue.lookup_ending("el outputs or CUDA errors.") is None
    # the whole message, begun where it begins: whole (the rules' and the exception
    # line's to read, not a line that lost its start)
    found = catalogue.lookup_ending("User-specified max_model_len (65536)" + ending[5:])
    assert found is not None and found.whole


def test_runs_of_spaces_read_as_one():
    """No shipped template has two spaces in a row, so a paste's run of spaces (parts of
    a message joined with a space each, a reflowed line) reads as one."""
    assert not [e for e in ROWS if "  " in e[0]]
    template = "Weight output_size_per_partition = {} is not divisible by min_thread_n = {}."
    row = row_of(template, "bad_config", True, "ValueError", "vllm/x.py", "check")
    catalogue = _catalogue_of(row)
    found = catalogue.lookup(
        "ValueError: Weight output_size_per_partition = 7392 is not divisible by  min_thread_n = 64."
    )
    assert found is not None and found.whole


def test_a_damaged_catalogue_is_refused():
    for data in (
        b"[]",
        b'{"format": 1, "entries": []}',
        b'{"format": 2, "entries": [[1]]}',
        # a row of format 1 (no ending's anchor)
        b'{"format": 2, "entries": [["t", "kv_cache", true, "E", "f", "g", 0, 0, "a", "b"]]}',
        b'{"format": 2, "entries": [["t", "nonsense", true, "E", "f", "g", 0, 0, "a", "b", 0, 0, "c", "d"]]}',
    ):
        with pytest.raises(ValueError):
            parse_catalogue(data)


def test_the_shipped_catalogue_is_current_and_large():
    generator = load_script("gen_catalogue_index")
    assert generator.OUT.read_text(encoding="utf-8") == generator.render(), (
        "rules/catalogue.json is not current: python scripts/gen_catalogue_index.py"
    )
    assert len(ROWS) > 3000
    assert isinstance(CATALOGUE.entry(0), Entry)


def test_a_message_reworded_after_a_long_opening_is_read_as_its_template():
    """Another wording of the same message (a release or fork that changed its end, a word
    lost in a paste): read after MIN_REWORDED fixed characters and MIN_REWORDED_WORDS
    words of its opening, below every whole or cut reading, never when categories
    disagree."""
    template = (
        "Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). "
        "Otherwise, the output might be wrong."
    )
    row = row_of(template, "model_requirement", True, "ValueError", "vllm/x.py", "build")
    catalogue = _catalogue_of(row)
    reworded = (
        "ValueError: Please use Flashinfer backend for models with logits_cap (i.e., Gemma-2)."
    )
    found = catalogue.lookup(reworded)
    assert found is not None and not found.whole
    assert found.entry.category is Category.MODEL_REQUIREMENT
    assert found.matched >= MIN_REWORDED
    # An opening shorter than that is no reading: it may begin many messages.
    assert catalogue.lookup("ValueError: Please use Flashinfer backend for other models.") is None
    # Another template of another category shares the opening: the reading is ambiguous.
    twin = row_of(
        "Please use Flashinfer backend for models with logits_soft_cap when the GPU is old.",
        "bad_config",
        True,
        "ValueError",
        "vllm/y.py",
        "check",
    )
    both = _catalogue_of(row, twin)
    assert both.lookup(reworded) is None
