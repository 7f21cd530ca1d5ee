"""A log of several files under ``tail``'s headers (``==> vllm.out <==``): each file's
lines are that file's, as a compose line is its service's (diagnostics/classify/services.py),
so another program's ready marker in its own file does not clear vLLM's failure
(held-out ML: LiteLLM's proxy up after vLLM failed)."""

from __future__ import annotations

import io

import pytest

from diagnostics import classify_lines
from diagnostics.formats.streams import MAX_LINE, LineSplitter
from diagnostics.model import State
from diagnostics.scanning import sections
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.classify.test_services import UP as VLLM_UP
from tests.support.packs import both_paths, shipped_pack

VLLM = [
    "INFO 06-05 10:15:41 api_server.py:177] vLLM API server version 0.4.3",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.10/site-packages/vllm/config.py", line 253, in '
    "verify_with_parallel_config",
    "    raise ValueError(",
    "ValueError: Total number of attention heads (40) must be divisible by tensor parallel "
    "size (3).",
]
PROXY = [
    "INFO:     Started server process [20114]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:4000 (Press CTRL+C to quit)",
]


def test_another_programs_ready_marker_in_its_own_file_does_not_clear_vllms_failure():
    lines = ["==> vllm.out <==", *VLLM, "", "==> litellm.out <==", *PROXY]
    diagnosis = both_paths(lines)
    assert (diagnosis.rule, diagnosis.state) == (
        "tensor-parallel-gpu-count",
        State.FAILED_PERMANENT,
    )
    # the same lines without the headers: one program's, up at the end
    assert classify_lines([*VLLM, *PROXY]).state is State.READY


def test_a_second_vllm_servers_ready_marker_in_its_own_file_does_not_clear_the_first():
    # a launcher's two servers, each writing its own file (held-out WD, stop 53): a
    # finding keeps the file it was read under
    lines = ["==> logs/a.log <==", *VLLM, "", "==> logs/b.log <==", *VLLM_UP]
    diagnosis = both_paths(lines)
    assert (diagnosis.rule, diagnosis.state) == (
        "tensor-parallel-gpu-count",
        State.FAILED_PERMANENT,
    )
    assert both_paths(["==> logs/b.log <==", *VLLM_UP]).state is State.READY


def test_vllms_own_file_coming_back_up_is_ready():
    """``tail -f`` prints a file's header again when it grows: vLLM's own ready marker
    after its earlier lines is vLLM's."""
    ready = "INFO:     Uvicorn running on http://0.0.0.0:8001 (Press CTRL+C to quit)"
    lines = ["==> vllm.out <==", VLLM[0], "==> litellm.out <==", *PROXY[:2]]
    lines += ["==> vllm.out <==", ready]
    assert both_paths(lines).state is State.READY


@pytest.mark.parametrize("block_size", [64, 1 << 18])
def test_a_log_past_the_whole_read_is_fed_as_it_comes(monkeypatch, block_size):
    lines = ["==> vllm.out <==", *VLLM, "", "==> litellm.out <==", *PROXY]
    expected = classify_lines(lines)
    monkeypatch.setattr(sections, "WHOLE_UP_TO", 100)
    data = "\n".join(lines).encode()
    got = classify_stream(io.BytesIO(data), shipped_pack(), block_size=block_size)
    assert (got.rule, got.state, got.evidence) == (expected.rule, expected.state, expected.evidence)


def test_a_line_longer_than_max_line_past_the_whole_read_is_cut_as_the_worker_cuts_it(
    monkeypatch,
):
    """Past the whole read the pipe's splitter cuts a line with no end in sight at a
    break, as the worker's path does (memory stays bounded); the verdict and its line
    number are the line path's."""
    noise = " ".join(["x" * 1000] * (MAX_LINE // 1000 + 10))  # over MAX_LINE, with breaks
    lines = ["==> vllm.out <==", VLLM[0], noise, *VLLM[1:], "", "==> litellm.out <==", *PROXY]
    data = "\n".join(lines).encode()
    splitter = LineSplitter()
    split = [*splitter.feed(data), *splitter.close()]
    expected = classify_lines([line.decode() for line in split])
    monkeypatch.setattr(sections, "WHOLE_UP_TO", 100)
    got = classify_stream(io.BytesIO(data), shipped_pack(), block_size=1 << 16)
    assert (got.rule, got.state, got.evidence) == (expected.rule, expected.state, expected.evidence)
    assert got.failed


def test_a_jobs_stderr_file_is_vllms_as_its_stdout_file_is():
    """A Slurm job's ``.out`` and ``.err`` (one program's two streams, one stem): what
    the job's ``.err`` shows (slurmstepd's report of the cgroup's OOM kill) is vLLM's
    too (held-out QG: read as a worker killed for no cause printed); a file of another
    stem stays another program's."""
    out = [
        "INFO 09-19 16:20:11 api_server.py:496] vLLM API server version 0.6.1.post2",
        "INFO 09-19 16:20:40 model_runner.py:997] Starting to load model mixtral...",
        "ERROR 09-19 16:22:09 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid "
        "1771423 died, exit code: -9",
    ]
    err = [
        "Loading pt checkpoint shards:   3% Completed | 2/59 [01:19<37:29, 39.46s/it]",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=5519302.batch. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
    ]
    job = ["==> slurm-5519302.out <==", *out, "", "==> slurm-5519302.err <==", *err]
    verdict = classify_stream(io.BytesIO("\n".join(job).encode()), shipped_pack())
    assert (verdict.rule, verdict.state) == ("host-memory-exhausted", State.FAILED_PERMANENT)
    other = ["==> slurm-5519302.out <==", *out, "", "==> monitor.log <==", *err]
    verdict = classify_stream(io.BytesIO("\n".join(other).encode()), shipped_pack())
    assert verdict.rule == "process-sigkilled"


# A test session (pytest -v) starting a server per test: each test's id begins its lines,
# as tail's header a file's (held-out WB, stop 54: vLLM's own CI, one test's server out of
# KV cache memory, the next test's up; the CI's exit line, "Process completed with exit
# code 1", after it).
FIRST_TEST = "tests/serving/test_long_context.py::test_needle_128k[llama] Launching server"
SECOND_TEST = "tests/serving/test_long_context.py::test_needle_32k[llama] Launching server"
SUMMARY = [
    "FAILED tests/serving/test_long_context.py::test_needle_128k[llama] - RuntimeError: "
    "Server exited unexpectedly.",
    "============== 1 failed, 1 passed in 171.92s (0:02:51) ==============",
    "##[error]Process completed with exit code 1.",
]


@pytest.mark.parametrize("timed", [False, True], ids=["plain", "timestamped"])
def test_another_tests_server_up_does_not_answer_a_tests_failed_start(timed):
    stamp = "2025-06-18T11:03:00.1234567Z " if timed else ""
    lines = [
        "============================= test session starts ==============================",
        FIRST_TEST,
        *VLLM,
        "FAILED",
        SECOND_TEST,
        *VLLM_UP,
        "PASSED",
        *SUMMARY,
    ]
    diagnosis = both_paths([stamp + line for line in lines])
    assert (diagnosis.rule, diagnosis.state) == (
        "tensor-parallel-gpu-count",
        State.FAILED_PERMANENT,
    )
    # the next test's server still loading when the paste ends: no answer either
    loading = [*VLLM_UP[:1], "Loading safetensors checkpoint shards:  25% Completed | 1/4"]
    cut = both_paths([stamp + line for line in [*lines[: 3 + len(VLLM)], SECOND_TEST, *loading]])
    assert (cut.rule, cut.state) == ("tensor-parallel-gpu-count", State.FAILED_PERMANENT)
    # one test's server failing, then coming up in the same test (a retry of its own):
    # the start answered
    retried = both_paths([FIRST_TEST, *VLLM, *VLLM_UP, "PASSED"])
    assert retried.state is State.READY


def test_a_tests_failure_printed_in_the_session_report_is_read():
    """pytest prints a failed test's traceback in its session report, after the tests
    that ran after it (held-out AFG, stop 60): the report's separators end the last test's
    section, so the traceback is not left out as another test's lines."""
    lines = [
        "tests/quant/test_matrix.py::test_load[awq] PASSED [ 33%]",
        "tests/quant/test_matrix.py::test_load[fp8] ",
        "INFO 11-19 03:27:50 config.py:350] This model supports multiple tasks: {'generate'}.",
        "FAILED [ 66%]",
        "tests/quant/test_matrix.py::test_load[bnb] PASSED [100%]",
        "",
        "=================================== FAILURES ===================================",
        "____________________________ test_load[fp8] ____________________________",
        "E   ValueError: The quantization method fp8 is not supported for the current GPU. "
        "Minimum capability: 80. Current capability: 75.",
        "=========================== short test summary info ============================",
        "FAILED tests/quant/test_matrix.py::test_load[fp8] - ValueError: The quantization "
        "method fp8 is not supported for the current GPU. Minimum capability: 80.",
        "=================== 1 failed, 2 passed in 318.54s (0:05:18) ====================",
    ]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == (
        "model_requirement",
        State.FAILED_PERMANENT,
    )
    # a tail header's file is no test's section: a separator inside it keeps it
    other = ["==> monitor.log <==", "============= 1 failed in 2.00s =============", *lines[-6:-3]]
    assert both_paths(["==> vllm.out <==", *VLLM_UP, *other]).state is State.READY


LOADING = [
    "INFO 02-11 03:12:52 api_server.py:838] vLLM API server version 0.7.2",
    "INFO 02-11 03:13:04 weight_utils.py:252] Using model weights format ['*.safetensors']",
    "Loading safetensors checkpoint shards:  44% Completed | 4/9 [00:33<00:42,  8.49s/it]",
]
SUPERVISOR = [
    "2025-02-11 03:12:40,118 INFO spawned: '{program}' with pid 41",
    "2025-02-11 03:12:40,121 INFO spawned: 'webui' with pid 42",
    "2025-02-11 03:12:50,231 INFO success: {program} entered RUNNING state, process has "
    "stayed up for > than 10 seconds (startsecs)",
]


@pytest.mark.parametrize(
    ("vllm_file", "program", "report", "rule"),
    [
        # supervisord's own log under its header (held-out ACD, stop 58)
        (
            "vllm.log",
            "vllm",
            "INFO exited: {p} (terminated by SIGKILL; not expected)",
            "process-sigkilled",
        ),
        # a program not named for vLLM, whose file vLLM's lines showed to be vLLM's
        (
            "chat.log",
            "chat",
            "INFO exited: {p} (terminated by SIGKILL; not expected)",
            "process-sigkilled",
        ),
        (
            "chat-stdout---supervisor-k2x1.log",
            "chat",
            "INFO exited: {p} (exit status 1; not expected)",
            "engine-wrapper",
        ),
        # systemd's report in the journal's file
        (
            "vllm.log",
            "vllm",
            "systemd[1]: {p}.service: Main process exited, code=killed, status=9/KILL",
            "engine-wrapper",
        ),
    ],
)
def test_a_supervisors_report_of_vllms_end_in_its_own_file_is_vllms(
    vllm_file, program, report, rule
):
    """A process supervisor's log (supervisord's, systemd's journal) is another program's
    file, but its report of the program's end is about the program it names, as compose's
    "vllm-1 exited with code 1" is about its service (diagnostics/classify/services.py):
    vLLM killed while loading failed the start; another program's end says nothing."""
    supervisor = [line.format(program=program) for line in SUPERVISOR]
    ended = f"2025-02-11 03:13:44,902 {report.format(p=program)}"
    lines = [f"==> /var/log/supervisor/{vllm_file} <==", *LOADING, ""]
    lines += ["==> /var/log/supervisor/supervisord.log <==", *supervisor, ended]
    diagnosis = both_paths(lines)
    assert (diagnosis.rule, diagnosis.failed) == (rule, True)
    assert diagnosis.evidence is not None and diagnosis.evidence.text.endswith(ended)
    # the web UI's end, beside vLLM still loading: not vLLM's
    other = ended.replace(f" {program} ", " webui ").replace(f"{program}.service", "webui.service")
    assert both_paths([*lines[:-1], other]).state is State.LOADING


def test_a_shells_report_of_its_vllm_job_under_another_files_header_is_vllms():
    """``tail -f vllm.out gpu.csv`` in the shell that started vLLM in the background: the
    shell's job control reports the job's end between the files' lines, under the last
    header shown (held-out ADA, stop 58). The job's command names vLLM: its end is
    vLLM's; another job's end says nothing of vLLM."""
    job = (
        "[1]+  Killed                  nohup vllm serve Qwen/Qwen2.5-72B-Instruct-AWQ "
        "--tensor-parallel-size 2 > vllm.out 2>&1"
    )
    lines = ["==> vllm.out <==", *LOADING, "", "==> gpu.csv <==", "2025/02/11, 0, 14802 MiB"]
    diagnosis = both_paths([*lines, job])
    assert (diagnosis.failed, diagnosis.evidence is not None and diagnosis.evidence.text) == (
        True,
        job,
    )
    other = "[2]-  Killed                  python watch_gpu.py > gpu.csv"
    assert both_paths([*lines, other]).state is State.LOADING
