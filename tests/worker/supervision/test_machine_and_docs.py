"""The lifecycle machine without processes, and the generated docs being current."""

from __future__ import annotations

import os

import pytest
from transitions import MachineError

from diagnostics import Category, Diagnosis, State
from diagnostics.model import failed_state
from tests.support import tiers
from tests.support.vllm_env import run_python
from worker.supervision.machine import Lifecycle, WorkerState


class Recorder:
    def __init__(self):
        self.calls = []

    def state_changed(self, source, dest):
        self.calls.append(("changed", source, dest))

    def ready(self):
        self.calls.append(("ready",))

    def failed(self, state, diagnosis):
        self.calls.append(("failed", diagnosis.rule))


def test_cold_start_path():
    effects = Recorder()
    lifecycle = Lifecycle(effects)
    lifecycle.loading_started()
    lifecycle.download_started()  # 0.32 downloads weights after "Starting to load model"
    lifecycle.loading_started()
    lifecycle.became_ready()
    assert lifecycle.state is WorkerState.READY and lifecycle.settled
    assert effects.calls[-1] == ("ready",)


@pytest.mark.parametrize(
    ("category", "state"),
    [
        (Category.OOM, WorkerState.FAILED_PERMANENT),
        (Category.CUDA_FAULT, WorkerState.FAILED_TRANSIENT),
    ],
)
def test_failure_follows_the_diagnosis(category, state):
    effects = Recorder()
    lifecycle = Lifecycle(effects)
    lifecycle.fail(Diagnosis(failed_state(category), category, "r"))
    assert lifecycle.state is state
    assert effects.calls[-1] == ("failed", "r")


def test_invalid_triggers_raise():
    lifecycle = Lifecycle(Recorder())
    lifecycle.fail(Diagnosis(State.FAILED_PERMANENT, Category.OOM, "r"))
    with pytest.raises(MachineError):
        lifecycle.became_ready()
    with pytest.raises(MachineError):
        lifecycle.stop()


def test_ready_can_only_fail_transiently():
    lifecycle = Lifecycle(Recorder())
    lifecycle.became_ready()
    with pytest.raises(MachineError):
        lifecycle.failed_permanently()
    lifecycle.diagnosis = Diagnosis(State.FAILED_TRANSIENT, Category.OTHER, "died")
    lifecycle.failed_transiently()
    assert lifecycle.state is WorkerState.FAILED_TRANSIENT


def test_generated_docs_are_current():
    # The reconstructed set's section is checked by its own test, from the one scoring
    # of its 30,000+ logs it makes (tests/diagnostics/test_reconstructed.py). The quick
    # run (tests/support/tiers.py) leaves out the real logs' accuracy table too: scoring
    # them again costs 4 CPU-s there, and test_diag_fixtures checks each one's verdict.
    skip = "accuracy-reconstructed,accuracy" if tiers.QUICK else "accuracy-reconstructed"
    argv = ["scripts/gen_docs.py", "--check", "--skip", skip]
    result = run_python(argv, dict(os.environ), timeout=300)
    assert result.returncode == 0, result.stdout + "\nrun: python scripts/gen_docs.py"
