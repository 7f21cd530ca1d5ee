"""A traceback chain whose origin no catalogued message names, ended in one vLLM raised
from it (``classify.findings.translated``): a generic structure rule reads both lines,
and the verdict is the later, catalogued one's. Built combinations through both paths,
the two tracebacks in one block and blocks apart."""

from __future__ import annotations

import pytest

from diagnostics.model import Category, State
from diagnostics.scanning.blockdb import relevant_ids
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()
START = "INFO 08-22 10:05:18 [api_server.py:1805] vLLM API server version 0.10.1.1"
MARKERS = {
    "direct-cause": "The above exception was the direct cause of the following exception:",
    "during-handling": "During handling of the above exception, another exception occurred:",
}
# (about 0.6 MB of long lines: the block scanner reads the two tracebacks in other blocks)
NOISE = [
    f"DEBUG 08-22 10:05:{n % 60:02d} [some_module.py:1] a line of nothing {n} " + "x" * 240
    for n in range(2500)
]


def _traceback(function: str, exception: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/utils.py", line 737, '
        f"in {function}",
        "    do_it()",
        exception,
    ]


UNCATALOGUED = _traceback("set_device_control_env_var", "IndexError: list index out of range")
# vLLM's own messages: a layout check (bad_config), a device-count check (other).
LAYOUT = 'Exception: Error setting CUDA_VISIBLE_DEVICES: local range: [4, 8) base value: "0,1,2,3"'
OTHER = (
    "RuntimeError: The number of CUDA devices has changed since the first call to "
    "torch.cuda.device_count(). This is not allowed and may result in undefined behavior."
)


def _chain(origin: list[str], marker: str, later: str, apart: bool) -> list[str]:
    noise = NOISE if apart else []
    return [START, *origin, *noise, "", MARKERS[marker], "", *_traceback("launch", later)]


@pytest.mark.parametrize("apart", [False, True], ids=["one-block", "blocks-apart"])
@pytest.mark.parametrize("marker", list(MARKERS))
def test_an_uncatalogued_origin_is_judged_by_the_message_vllm_raised_from_it(marker, apart):
    verdict = both_paths(_chain(UNCATALOGUED, marker, LAYOUT, apart), PACK)
    assert (verdict.state, verdict.category) == (State.FAILED_PERMANENT, Category.BAD_CONFIG)
    assert verdict.evidence is not None and "Error setting" in verdict.evidence.text


@pytest.mark.parametrize("apart", [False, True], ids=["one-block", "blocks-apart"])
def test_a_catalogued_origin_stays_the_verdict(apart):
    later = "IndexError: visible device ordinal 5 is out of range for CUDA_VISIBLE_DEVICES=0,1"
    alone = both_paths([START, *_traceback("launch", later)], PACK)
    assert alone.category is Category.MODEL_REQUIREMENT  # (catalogued too, another category)
    verdict = both_paths(_chain(_traceback("check", LAYOUT), "direct-cause", later, apart), PACK)
    assert verdict.evidence is not None and "Error setting" in verdict.evidence.text
    assert verdict.category is Category.BAD_CONFIG


@pytest.mark.parametrize(
    "later", [OTHER, "RuntimeError: an error nobody catalogued"], ids=["other", "uncatalogued"]
)
def test_a_later_message_that_says_no_more_leaves_the_origin(later):
    alone = both_paths([START, *UNCATALOGUED], PACK)
    verdict = both_paths(_chain(UNCATALOGUED, "direct-cause", later, False), PACK)
    assert verdict.evidence is not None and "IndexError" in verdict.evidence.text
    assert (verdict.state, verdict.category) == (alone.state, alone.category)


def test_a_new_traceback_without_a_chain_marker_is_not_a_translation():
    lines = [START, *UNCATALOGUED, "", *_traceback("launch", LAYOUT)]
    verdict = both_paths(lines, PACK)
    assert verdict.evidence is not None and "IndexError" in verdict.evidence.text


def test_the_block_scan_reads_the_later_lines_of_a_structure_verdicts_rule():
    """The fast path skips hit lines that cannot change the verdict; a generic structure
    rule's own later lines can (its chain's end), a specific cause's cannot."""
    for kind in ("structure", "cause"):
        owner = next(n for n, r in enumerate(PACK.rules) if r.kind == kind)
        own = {n for n, p in enumerate(PACK.patterns) if p.kind == "rule" and p.owner == owner}
        relevant = relevant_ids(PACK, PACK.rules[owner].rank)
        assert own and (own <= relevant if kind == "structure" else not own & relevant), kind
