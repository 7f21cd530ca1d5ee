"""A runner's or a shell's report that the command it ran ended (rules/90-generic.yaml:
runner-exit-sigkill, runner-exit-status, shell-exit-status): a start under way that such
a line follows failed; a number the shell was not asked for, a stop a runner reports as
such, or the end of a command that ran past vLLM's ready marker is not a failed start.
Written from the runners' words (make, just, GitHub Actions, npm, Jenkins, Slurm's srun,
GNU time) and the shells' (bash and zsh's ``$?``, fish's ``$status``, PowerShell's
``$LASTEXITCODE``: the shell was asked once the command had ended, the status it answers
is kept for the cause); held-out set NB (a Mac's shell)."""

from __future__ import annotations

import pytest

from diagnostics import classify_lines
from diagnostics.model import State

START = [
    "INFO 01-22 19:51:30 api_server.py:712] vLLM API server version 0.6.6",
    "INFO 01-22 19:51:40 weight_utils.py:251] Using model weights format ['*.safetensors']",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:06<00:06,  6.48s/it]",
]
OFFLINE_UP = "Processed prompts: 100%|██████████| 4/4 [00:01<00:00,  2.61it/s]"

KILLED = [
    ["make: *** [Makefile:12: serve] Error 137"],
    ["make[1]: *** [Makefile:7: run] Killed"],
    ["error: Recipe `serve` failed on line 3 with exit code 137"],
    ["Error: Process completed with exit code 137."],
    ["srun: error: gpu-node-3: task 0: Killed"],
    ["srun: error: gpu-node-3: task 0: Exited with exit code 137"],
    ["Command exited with non-zero status 137"],
]
SHELL_KILLED = [
    ["❯ echo $?", "137"],
    ["user@box:~$ echo $?", "137"],
    ["> echo $status", "137"],
    ["PS C:\\Users\\me> $LASTEXITCODE", "137"],
]
ERRORED = [
    ["make: *** [Makefile:12: serve] Error 1"],
    ["error: Recipe `serve` failed on line 3 with exit code 2"],
    ["Error: Process completed with exit code 1."],
    ["npm ERR! code 1", "error Command failed with exit code 1."],
    ["ERROR: script returned exit code 1"],
    ["srun: error: gpu-node-3: task 0: Exited with exit code 1"],
    ["Command exited with non-zero status 1"],
    ["$ echo $?", "1"],
    ["$ echo $?", "139"],
    ["PS C:\\Users\\me> $LASTEXITCODE", "1"],
]


@pytest.mark.parametrize("report", KILLED, ids=[r[0] for r in KILLED])
def test_a_command_killed_is_a_failed_start_killed(report):
    diagnosis = classify_lines([*START, *report])
    assert diagnosis.state is State.FAILED_TRANSIENT
    assert diagnosis.rule == "runner-exit-sigkill"
    assert "SIGKILL" in diagnosis.cause


@pytest.mark.parametrize("report", SHELL_KILLED, ids=[r[0] for r in SHELL_KILLED])
def test_the_shells_status_137_is_named_in_the_cause(report):
    diagnosis = classify_lines([*START, *report])
    assert (diagnosis.rule, diagnosis.state) == ("shell-exit-status", State.FAILED_TRANSIENT)
    assert "exit status 137 (137 is SIGKILL" in diagnosis.cause


@pytest.mark.parametrize("report", ERRORED, ids=[r[0] for r in ERRORED])
def test_a_command_that_exited_with_an_error_is_a_failed_start(report):
    diagnosis = classify_lines([*START, *report])
    assert diagnosis.state is State.FAILED_TRANSIENT
    assert diagnosis.rule in ("runner-exit-status", "shell-exit-status")


NOT_FAILED = [
    ["137"],  # a number the shell was not asked for
    ["$ echo $PATH", "/usr/bin"],
    ["$ nproc", "16"],
    ["make: *** [Makefile:12: serve] Interrupt"],
]


@pytest.mark.parametrize("tail", NOT_FAILED, ids=["-".join(t) for t in NOT_FAILED])
def test_a_status_that_is_no_error_leaves_the_start_under_way(tail):
    diagnosis = classify_lines([*START, *tail])
    assert diagnosis.state is State.LOADING, diagnosis.rule


@pytest.mark.parametrize("report", [KILLED[0], ERRORED[2], ERRORED[7]], ids=str)
def test_a_command_that_ends_after_an_offline_engine_came_up_is_not_its_start(report):
    # a CI job's tests of an offline engine failing after it came up: the step's exit
    # says nothing of the start (after a ready marker these count once vLLM exited)
    diagnosis = classify_lines([*START, OFFLINE_UP, "FAILED tests/test_x.py::test_y", *report])
    assert not diagnosis.failed, diagnosis.rule


@pytest.mark.parametrize("report", [KILLED[0], ERRORED[0], ERRORED[7]], ids=str)
def test_a_cause_printed_before_the_report_names_the_failure(report):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    diagnosis = classify_lines([*START, oom, *report])
    assert str(diagnosis.category) == "oom", diagnosis.rule


# Triton's report of its vLLM backend's exception: the message after its words is read
# as the exception line, so a rule that names it decides (here: a package missing from
# the image, permanent), as when vLLM's own traceback shows it.
TRITON = [
    'E0418 08:33:07.412587 1 backend_model.cc:692] "ERROR: Failed to create instance: {m}"',
    "E0418 08:33:07.412690 1 model_lifecycle.cc:641] \"failed to load 'vllm_model' version 1:"
    ' Internal: {m}"',
    "E0118 03:13:02.117485 1 backend_model.cc:634] ERROR: Failed to create instance: {m}",
]
MISSING = "ModuleNotFoundError: No module named 'flash_attn'"


@pytest.mark.parametrize("report", TRITON)
def test_an_exception_triton_reports_is_read_as_its_own_line(report):
    alone = classify_lines([*START, MISSING])
    quoted = classify_lines([*START, report.format(m=MISSING)])
    assert (quoted.rule, quoted.state) == (alone.rule, alone.state)
    assert quoted.state is State.FAILED_PERMANENT
