"""A start stopped by hand (Ctrl-C) is judged by where it was stopped: inside a
collective operation between the GPUs it is the hang NCCL's watchdog would report
(``interrupted-in-collective``, cuda_fault, transient, a consequence); anywhere else it
says nothing of the GPUs; and a cause another rank printed decides over it."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths

SITE = "/usr/local/lib/python3.10/dist-packages"


def _frame(path: str, function: str) -> str:
    return f'  File "{SITE}/{path}", line 33, in {function}'


COLLECTIVE = [
    "Traceback (most recent call last):",
    _frame("vllm/worker/worker.py", "init_worker_distributed_environment"),
    "    pynccl_utils.all_reduce(torch.zeros(1).cuda())",
    _frame("vllm/distributed/device_communicators/pynccl.py", "all_reduce"),
    "    NCCL_CHECK(",
    "KeyboardInterrupt",
]
C10D = [
    "Traceback (most recent call last):",
    _frame("vllm/distributed/parallel_state.py", "init_distributed_environment"),
    "    torch.distributed.barrier()",
    _frame("torch/distributed/distributed_c10d.py", "barrier"),
    "    work.wait()",
    "KeyboardInterrupt",
]
LOADING = [
    "Traceback (most recent call last):",
    _frame("vllm/model_executor/model_loader/weight_utils.py", "safetensors_weights_iterator"),
    "    param = f.get_tensor(name)",
    "KeyboardInterrupt",
]


@pytest.mark.parametrize("lines", [COLLECTIVE, C10D], ids=["vllm's communicator", "torch c10d"])
@pytest.mark.parametrize("prefix", ["", "(VllmWorkerProcess pid=7) "])
def test_stopped_inside_a_collective_is_a_hang_of_the_gpus(lines, prefix):
    diagnosis = both_paths([prefix + line for line in lines])
    assert (str(diagnosis.category), diagnosis.state) == ("cuda_fault", State.FAILED_TRANSIENT)
    assert diagnosis.rule == "interrupted-in-collective"


def test_stopped_while_loading_says_nothing_of_the_gpus():
    diagnosis = both_paths(LOADING)
    assert diagnosis.rule != "interrupted-in-collective"
    assert diagnosis.state is State.FAILED_TRANSIENT


@pytest.mark.parametrize(
    ("cause", "category", "state"),
    [
        (
            "ValueError: Total number of attention heads (28) must be divisible by tensor "
            "parallel size (8).",
            "bad_config",
            State.FAILED_PERMANENT,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a "
            "total capacity of 23.64 GiB of which 1.06 GiB is free. Including non-PyTorch "
            "memory, this process has 22.56 GiB memory in use.",
            "oom",
            State.FAILED_PERMANENT,
        ),
    ],
)
@pytest.mark.parametrize("order", ["cause first", "interrupt first"])
def test_another_ranks_cause_decides_over_the_interrupt(cause, category, state, order):
    """One rank failed and the others waited in the collective until Ctrl-C: the cause
    decides, printed before or after the interrupted rank's traceback."""
    failed = [
        "(VllmWorkerProcess pid=9) Traceback (most recent call last):",
        f"(VllmWorkerProcess pid=9) {_frame('vllm/worker/worker.py', 'load_model')}",
        f"(VllmWorkerProcess pid=9) {cause}",
    ]
    interrupted = COLLECTIVE
    lines = [*failed, *interrupted] if order == "cause first" else [*interrupted, *failed]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == (category, state), diagnosis.rule
