"""A ``raise X(...)`` code line and the exception line it raised are one event
(diagnostics.classify.findings.Raising): a finding on the exception line takes the code
line's place, so the pack's order decides between their readings and the same rule's
finding moves to the exception line, whose values the cause quotes. Both paths."""

from __future__ import annotations

import pytest

from diagnostics.classify.findings import RAISED_WITHIN
from diagnostics.model import Category, State
from tests.support.packs import both_paths

PREFIX = "(EngineCore_DP0 pid=118) ERROR 03-24 15:07:42 [core.py:951] "
FRAME = (
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/'
    'default_loader.py", line 187, in _prepare_weights'
)
WEIGHTS_CODE = (
    '    raise RuntimeError(f"Cannot find any model weights with `{model_name_or_path}`")'
)
WEIGHTS_RAISED = "RuntimeError: Cannot find any model weights with `Qwen/Qwen3-14B`"
NCCL_FRAME = (
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/'
    'pynccl_wrapper.py", line 257, in NCCL_CHECK'
)
NCCL_CODE = '    raise RuntimeError(f"NCCL error: {error_str}")'
NCCL_RAISED = (
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
)
CARETS = "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"
OFFLINE = "HF_HUB_OFFLINE=1"


def traceback(*lines: str, prefix: str = "") -> list[str]:
    return [prefix + line for line in ("Traceback (most recent call last):", *lines)]


@pytest.mark.parametrize("prefix", ["", PREFIX], ids=["bare", "engine-core"])
@pytest.mark.parametrize("carets", [[], [CARETS]], ids=["py310", "py311-carets"])
def test_the_exception_lines_reading_decides_with_the_hub_switched_off(prefix, carets):
    """The code line reads as a folder that is not there (its f-string's placeholder for
    the model); the exception line, with the hub switched off, as the offline cache's
    miss, a rule the pack places first: one event, so the pack's order decides."""
    raised = traceback(FRAME, WEIGHTS_CODE, *carets, WEIGHTS_RAISED, prefix=prefix)
    verdict = both_paths([OFFLINE, *raised])
    assert (verdict.rule, verdict.category, verdict.state) == (
        "hub-lookup-offline",
        Category.NETWORK,
        State.FAILED_TRANSIENT,
    )
    assert verdict.evidence is not None and verdict.evidence.text.endswith(WEIGHTS_RAISED)
    assert "Qwen/Qwen3-14B" in (verdict.cause or "")


@pytest.mark.parametrize("carets", [[], [CARETS]], ids=["py310", "py311-carets"])
def test_the_same_rules_finding_moves_to_the_exception_line(carets):
    verdict = both_paths(traceback(NCCL_FRAME, NCCL_CODE, *carets, NCCL_RAISED))
    assert verdict.rule == "nccl-failure"
    assert verdict.evidence is not None
    assert verdict.evidence.text == NCCL_RAISED
    assert verdict.evidence.line == 4 + len(carets)
    assert "unhandled cuda error" in (verdict.cause or "")
    assert "{error_str}" not in (verdict.cause or "")
    # hub switched off or not, a folder not there: the exception line names it
    folder = both_paths(traceback(FRAME, WEIGHTS_CODE, *carets, WEIGHTS_RAISED))
    assert folder.category is Category.MODEL_NOT_FOUND
    assert folder.evidence is not None and folder.evidence.text == WEIGHTS_RAISED


def test_a_code_line_alone_still_reads():
    """A paste cut after the code line: the code line is all there is."""
    verdict = both_paths(traceback(NCCL_FRAME, NCCL_CODE))
    assert verdict.rule == "nccl-failure"
    assert verdict.evidence is not None and verdict.evidence.text == NCCL_CODE


def test_an_exception_line_further_down_is_another_event():
    """Past ``RAISED_WITHIN`` lines the exception line is not the code line's: the
    earliest specific cause stands."""
    filler = ["    some other line of the paste"] * RAISED_WITHIN
    lines = [OFFLINE, *traceback(FRAME, WEIGHTS_CODE), *filler, WEIGHTS_RAISED]
    verdict = both_paths(lines)
    assert verdict.rule == "model-path-not-found"
    assert verdict.evidence is not None and verdict.evidence.text == WEIGHTS_CODE


def test_a_better_rank_on_a_line_between_is_not_moved():
    """A memory finding between the code line and an exception line is its own: it wins
    by its rank, and the code line's event does not take its place."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    verdict = both_paths([*traceback(NCCL_FRAME, NCCL_CODE), oom, NCCL_RAISED])
    assert verdict.category is Category.OOM


HUB_FRAME = (
    '  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", '
    "line 106, in send"
)
HUB_CODE = "    raise OfflineModeIsEnabled("
HUB_RAISED = (
    "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/"
    "org/model/resolve/main/config.json: offline mode is enabled. To disable it, please "
    "unset the `HF_HUB_OFFLINE` environment variable."
)


@pytest.mark.parametrize("qualified", [True, False], ids=["qualified", "bare-name"])
def test_the_exception_line_of_the_class_the_statement_names_is_the_event(qualified):
    """An exception class whose name ends in neither Error nor Exception: its line under
    the statement that raised it is still that statement's exception line."""
    raised = HUB_RAISED if qualified else HUB_RAISED.removeprefix("huggingface_hub.errors.")
    verdict = both_paths(traceback(HUB_FRAME, HUB_CODE, CARETS, raised))
    assert (verdict.rule, verdict.category) == ("hub-offline-cache-miss", Category.NETWORK)
    assert verdict.evidence is not None and verdict.evidence.text == raised


def test_a_line_of_another_class_under_the_statement_is_not_its_exception_line():
    other = "huggingface_hub.errors.SomethingElse: Cannot reach the hub: offline mode is enabled"
    verdict = both_paths(traceback(HUB_FRAME, HUB_CODE, other))
    assert verdict.rule == "hub-offline-cache-miss"
    assert verdict.evidence is not None and verdict.evidence.text == HUB_CODE
