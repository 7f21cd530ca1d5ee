"""A message printed twice, the first time cut before its numbers (Triton's stub report
ends at "GPU " and then shows the frames; its model-lifecycle report prints the message
whole): what the later one captures fills what the first one's lines lack, so the
numbers that decide permanence by evidence are read (held-out set NZ). The first one's
own captures stand; a later message in another traceback (another rank's) fills nothing."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths

CUT = (
    'I0611 09:18:04.903114 1 pb_stub.cc:346] "Failed to initialize Python stub: '
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB. GPU \\n\\nAt:\\n  "
    '/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py(1016): _run_model"'
)
WHOLE = (
    "E0611 09:18:04.931270 1 model_lifecycle.cc:641] failed to load 'phi3_mini' version 1: "
    "Internal: OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB. GPU 0 has "
    "a total capacity of 79.15 GiB of which 1.02 GiB is free. Process 2291 has 70.71 GiB "
    "memory in use. Process 2377 has 7.40 GiB memory in use. Of the allocated memory 6.88 "
    "GiB is allocated by PyTorch, and 29.46 MiB is reserved by PyTorch but unallocated."
)
# the same message whole, vLLM's own process holding the GPU (PyTorch's share of it)
OWN = (
    "E0611 09:18:04.931270 1 model_lifecycle.cc:641] failed to load 'phi3_mini' version 1: "
    "Internal: OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB. GPU 0 has "
    "a total capacity of 79.15 GiB of which 1.02 GiB is free. Process 2291 has 78.10 GiB "
    "memory in use. Of the allocated memory 76.88 GiB is allocated by PyTorch, and 29.46 "
    "MiB is reserved by PyTorch but unallocated."
)


def test_the_numbers_printed_again_decide_permanence():
    cut = both_paths([CUT])
    assert (str(cut.category), cut.state) == ("oom", State.FAILED_PERMANENT)  # no numbers
    again = both_paths([CUT, WHOLE])
    assert (str(again.category), again.state) == ("oom", State.FAILED_TRANSIENT)
    assert again.evidence is not None and again.evidence.line == 1  # the first report
    own = both_paths([CUT, OWN])
    assert own.state is State.FAILED_PERMANENT  # its own process holds the GPU


@pytest.mark.parametrize("first", [WHOLE, OWN])
def test_the_first_messages_own_numbers_stand(first):
    alone = both_paths([first])
    later = OWN if first is WHOLE else WHOLE
    assert both_paths([first, later]).state is alone.state


def test_a_message_in_another_traceback_fills_nothing():
    other_rank = ["Traceback (most recent call last):", '  File "x.py", line 1, in f', WHOLE]
    assert both_paths([CUT, *other_rank]).state is State.FAILED_PERMANENT
