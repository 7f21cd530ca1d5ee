"""The shapes real pastes take, built from real messages: hard-wrapped lines, Jupyter
tracebacks, interleaved worker processes, Windows line ends, line numbers and quote
markers, container prefixes, elided pastes; and permanence judged on the numbers."""

from __future__ import annotations

import io

import pytest

from diagnostics import Classifier, classify_lines
from diagnostics.classify.normalize import normalize, strip_ansi, wrapped_at_width
from diagnostics.model import Category, State
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()

FREE = (
    "(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866] ValueError: Free memory on "
    "device (4.04/119.63 GiB) on startup is less than desired GPU memory utilization (0.15, "
    "17.94 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
)
TRACEBACK = [
    "(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866]   File "/usr/local/lib/python3.12/'
    'site-packages/vllm/v1/worker/gpu_worker.py", line 239, in determine_available_memory',
    FREE,
]


def _both_ways(lines: list[str]):
    """The verdict fed line by line, and read as a file (the block scanner)."""
    live = Classifier(PACK).feed_all(lines).diagnosis()
    data = "\n".join(lines).encode()
    return live, classify_stream(io.BytesIO(data), PACK)


def _wrap(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)]


@pytest.mark.parametrize("quote", ["", "> "], ids=["as printed", "quoted in a reply"])
@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_a_message_hard_wrapped_at_a_terminal_width_is_joined(width, quote):
    """Also quoted in a reply after the terminal wrapped it: every part under "> "."""
    lines = [quote + part for line in TRACEBACK for part in _wrap(line, width)]
    for diagnosis in _both_ways(lines):
        assert diagnosis.rule == "gpu-free-memory-below-utilization", (width, diagnosis)
        # The numbers split across the cut were read whole: 4.04 of 119.63 GiB free
        # against 0.15 asked is another process holding the GPU, a host condition.
        assert diagnosis.state is State.FAILED_TRANSIENT
        assert "4.04 GiB of 119.63 GiB" in diagnosis.cause
        assert diagnosis.evidence.line == next(
            n for n, part in enumerate(lines, 1) if "ValueError: Fr" in part
        )


def test_a_line_at_a_terminal_width_followed_by_a_longer_one_is_not_joined():
    """pydantic's header is 80 columns for ModelConfig; the message after it is a line of
    its own (a terminal cuts every part at one width, so a longer line is no part): read
    alone, from its own line, not as the header's continuation."""
    header = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    assert wrapped_at_width(header)
    message = (
        "  Value error, User-specified max_model_len (8192) is greater than the derived "
        "max_model_len (max_position_embeddings=2048 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value=ArgsKwargs((), "
        "{'model': 'org/m'}), input_type=ArgsKwargs]"
    )
    for diagnosis in _both_ways([header, message]):
        assert diagnosis.rule == "max-model-len-above-model-limit", diagnosis
        assert diagnosis.evidence.line == 2
        assert diagnosis.evidence.text == message


def test_a_message_cut_before_its_trailing_mark_is_read_whole():
    """pydantic v1 ends the message with its mark: the last part alone reads as a bare
    validation error (bad_config), the parts joined as the catalogued message they are."""
    text = (
        "Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). "
        "Otherwise, the output might be wrong. Set Flashinfer backend by export "
        "VLLM_ATTENTION_BACKEND=FLASHINFER. (type=value_error)"
    )
    whole = Classifier(PACK).feed_all([text]).diagnosis()
    assert whole.category is Category.MODEL_REQUIREMENT
    for width in (80, 100, 120):
        for diagnosis in _both_ways(_wrap(text, width)):
            assert (diagnosis.category, diagnosis.rule) == (whole.category, whole.rule), width
            assert diagnosis.evidence.line == 1


def test_a_cut_message_reads_the_same_wherever_a_block_ends():
    """The block scanner reads a block whose last line is cut at a terminal's width even
    when nothing in the block alone matters: the message goes on in the next block."""
    text = (
        "Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). "
        "Otherwise, the output might be wrong. Set Flashinfer backend by export "
        "VLLM_ATTENTION_BACKEND=FLASHINFER. (type=value_error)"
    )
    lines = [
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.5.4",
        *_wrap(text, 80),
    ]
    live = Classifier(PACK).feed_all(lines).diagnosis()
    assert live.rule == "catalogued-model-requirement"
    data = ("\n".join(lines) + "\n").encode()
    for size in range(16, len(data) + 1, 7):
        assert classify_stream(io.BytesIO(data), PACK, block_size=size) == live, size


def test_only_lines_at_a_terminal_width_look_wrapped():
    assert wrapped_at_width("x" * 80) and wrapped_at_width("x" * 120)
    assert not wrapped_at_width("x" * 79)
    assert not wrapped_at_width("x" * 81)
    assert wrapped_at_width("x" * 79 + " ")


@pytest.mark.parametrize(
    ("free", "total", "util", "state"),
    [
        ("31.44", "47.38", "0.95", State.FAILED_TRANSIENT),  # another process holds a third
        ("54.34", "79.18", "0.92", State.FAILED_TRANSIENT),
        # a small share, but others hold three quarters of the GPU: the host
        ("19.21", "79.19", "0.3", State.FAILED_TRANSIENT),
        ("4.04", "119.63", "0.15", State.FAILED_TRANSIENT),
        ("78.50", "79.18", "0.995", State.FAILED_PERMANENT),  # asked for all of it: config
        ("44.20", "47.38", "0.95", State.FAILED_PERMANENT),  # others hold under a tenth
        ("14.90", "15.75", "0.98", State.FAILED_PERMANENT),
    ],
)
def test_free_memory_permanence_is_judged_on_the_numbers(free, total, util, state):
    line = (
        f"ValueError: Free memory on device ({free}/{total} GiB) on startup is less than "
        f"desired GPU memory utilization ({util}, 45.01 GiB). Decrease GPU memory utilization "
        "or reduce GPU memory used by other processes."
    )
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert (diagnosis.category, diagnosis.state) == (Category.OOM, state)
    if state is State.FAILED_TRANSIENT:
        assert "another process holds the GPU" in diagnosis.cause


# GiB other processes hold of an 80 GiB GPU with 1 GiB free (vLLM holds the rest), and the
# verdict. Others within the slack vLLM's default share leaves (0.1) and a tenth more:
# vLLM's own configuration does not fit; beyond it, another process holds the GPU (a
# host condition).
HELD_BY_OTHERS = [
    (0.0, State.FAILED_PERMANENT),
    (3.0, State.FAILED_PERMANENT),
    (8.0, State.FAILED_PERMANENT),
    (15.0, State.FAILED_PERMANENT),
    (17.0, State.FAILED_TRANSIENT),
    (34.0, State.FAILED_TRANSIENT),
    (60.0, State.FAILED_TRANSIENT),
    (74.0, State.FAILED_TRANSIENT),
]


@pytest.mark.parametrize(("others", "state"), HELD_BY_OTHERS)
def test_oom_permanence_is_judged_on_memory_held_by_other_processes(others, state):
    """Others holding more than a fifth of the GPU: the slack vLLM's default share (0.9)
    leaves, and a tenth more (gpu-free-memory-below-utilization's margin)."""
    mine = 80.0 - 1.0 - others
    listed = f"Process 1253 has {others:.2f} GiB memory in use. " if others else ""
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.44 GiB. GPU 0 has a "
        f"total capacity of 80.00 GiB of which 1.00 GiB is free. {listed}Including non-PyTorch "
        f"memory, this process has {mine:.2f} GiB memory in use. Of the allocated memory 60 "
        "GiB is allocated by PyTorch"
    )
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert (diagnosis.category, diagnosis.state) == (Category.OOM, state)


@pytest.mark.parametrize(
    "pools", ["", "with 128.00 MiB allocated in private pools (e.g., CUDA Graphs), "]
)
@pytest.mark.parametrize(("others", "state"), HELD_BY_OTHERS)
def test_oom_without_this_process_is_judged_on_what_pytorch_holds(others, state, pools):
    """torch lists the GPU's processes and finds itself among them by PID; in a container
    it does not, and prints no "this process has": what PyTorch holds in this process
    (allocated and reserved) stands for it, with the same margin."""
    mine = 80.0 - 1.0 - others  # vLLM's process: PyTorch's part and 0.5 GiB of its own
    listed = f"Process 1253 has {others:.2f} GiB memory in use. " if others else ""
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.44 GiB. GPU 0 has a "
        f"total capacity of 80.00 GiB of which 1.00 GiB is free. {listed}Process 40 has "
        f"{mine:.2f} GiB memory in use. Of the allocated memory {mine - 0.75:.2f} GiB is "
        f"allocated by PyTorch, {pools}and 256.00 MiB is reserved by PyTorch but unallocated. "
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF"
    )
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert (diagnosis.category, diagnosis.state) == (Category.OOM, state)
    assert "3.44 GiB" in diagnosis.cause and "80.00 GiB" in diagnosis.cause


@pytest.mark.parametrize(
    ("others", "state"), [(0.0, State.FAILED_PERMANENT), (45.0, State.FAILED_TRANSIENT)]
)
def test_oom_cut_after_what_pytorch_allocated_is_judged_on_the_rest(others, state):
    """A paste cut after "allocated by PyT" (the reserve unknown): what PyTorch allocated
    stands for this process and half the GPU besides is another process's, as the older
    wording's reserve alone (held-out AEC, stop 59)."""
    mine = 80.0 - 1.0 - others
    listed = f"Process 1253 has {others:.2f} GiB memory in use. " if others else ""
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a "
        f"total capacity of 80.00 GiB of which 1.00 GiB is free. {listed}Process 40 has "
        f"{mine:.2f} GiB memory in use. Of the allocated memory {mine - 0.75:.2f} GiB is "
        "allocated by PyT"
    )
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert (diagnosis.category, diagnosis.state) == (Category.OOM, state)


@pytest.mark.parametrize(
    ("message", "state"),
    [
        # the allocator's numbers: this process holds the GPU (a model loaded under
        # init_device, as V0's speculative decoding worker loads its draft model)
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 MiB. GPU 0 has "
            "a total capacity of 22.06 GiB of which 58.12 MiB is free. Including non-PyTorch "
            "memory, this process has 21.99 GiB memory in use.",
            State.FAILED_PERMANENT,
        ),
        # ... another process holds it
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 MiB. GPU 0 has "
            "a total capacity of 22.06 GiB of which 58.12 MiB is free. Process 77 has 21.50 GiB "
            "memory in use. Including non-PyTorch memory, this process has 0.49 GiB memory in "
            "use.",
            State.FAILED_TRANSIENT,
        ),
        # no numbers: setting up the device, so the GPU is held by others
        ("RuntimeError: CUDA error: out of memory", State.FAILED_TRANSIENT),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB",
            State.FAILED_TRANSIENT,
        ),
    ],
)
def test_oom_under_init_device_is_judged_by_the_allocators_numbers_when_it_gives_them(
    message, state
):
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/executor/gpu_executor.py", line 39, in _init_executor',
        "    self.driver_worker.init_device()",
        '  File "/usr/lib/python3/dist-packages/vllm/spec_decode/spec_decode_worker.py", line 333, in init_device',
        "    self.proposer_worker.load_model()",
        '  File "/usr/lib/python3/dist-packages/vllm/model_executor/layers/linear.py", line 121, in create_weights',
        "    weight = Parameter(torch.empty(sum(output_partition_sizes),",
        message,
    ]
    for diagnosis in _both_ways(lines):
        assert (diagnosis.category, diagnosis.state) == (Category.OOM, state), diagnosis.rule


TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
    "total capacity of 39.39 GiB of which 347.38 MiB is free. {listed}Including non-PyTorch "
    "memory, this process has {mine:.2f} GiB memory in use. Of the allocated memory 16.51 GiB "
    "is allocated by PyTorch, and 153.27 MiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


@pytest.mark.parametrize("quote", ["", "> "], ids=["as printed", "quoted in a reply"])
@pytest.mark.parametrize("width", [40, 45, 50, 60, 72, 79])
@pytest.mark.parametrize(
    ("others", "state"), [(0.0, State.FAILED_PERMANENT), (21.86, State.FAILED_TRANSIENT)]
)
def test_a_torch_oom_reflowed_at_word_breaks_is_judged_on_all_its_lines(
    width, quote, others, state
):
    """torch's message reflowed by a paste (a reply, a mail, a narrow terminal) at word
    breaks, under any terminal's width: who holds the GPU, which its last lines say,
    decides permanence (cuda-oom-allocate reads its message over up to eight lines)."""
    import textwrap

    listed = f"Process 80211 has {others:.2f} GiB memory in use. " if others else ""
    message = TORCH_OOM.format(listed=listed, mine=39.39 - 0.34 - others)
    tail = ["", "Sorry for the wrapping, copied over ssh."]
    lines = [quote + part for part in textwrap.wrap(message, width)] + tail
    for diagnosis in _both_ways(lines):
        assert (diagnosis.rule, diagnosis.state) == ("cuda-oom-allocate", state), (width, diagnosis)
        assert "896.00 MiB" in diagnosis.cause and "39.39 GiB" in diagnosis.cause


def test_jupyter_traceback():
    lines = [
        "---------------------------------------------------------------------------",
        "ValueError                                Traceback (most recent call last)",
        "Cell In[3], line 1",
        '----> 1 llm = LLM(model="google/gemma-3-4b-it", max_model_len=200000)',
        "",
        "File ~/miniconda3/lib/python3.10/site-packages/vllm/engine/arg_utils.py:1021, in "
        "EngineArgs.create_model_config(self)",
        "   1019 def create_model_config(self) -> ModelConfig:",
        "-> 1021     return ModelConfig(",
        "",
        "ValueError: User-specified max_model_len (200000) is greater than the derived "
        "max_model_len (max_position_embeddings=131072 or model_max_length=None in model's "
        "config.json).",
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.rule == "max-model-len-above-model-limit"
        assert "131072" in diagnosis.cause


def test_interleaved_workers_the_root_cause_in_one_rank_wins_over_wrappers():
    lines = [
        "(VllmWorker rank=0 pid=101) INFO 04-14 14:24:40 [gpu_model_runner.py:1] Starting to "
        "load model Qwen/Qwen2.5-VL-72B-Instruct...",
        "(VllmWorker rank=1 pid=102) ERROR 04-14 14:24:52 [multiproc_executor.py:383] "
        "WorkerProc hit an exception.",
        "(VllmWorker rank=0 pid=101) ERROR 04-14 14:24:52 [multiproc_executor.py:383] "
        "WorkerProc hit an exception.",
        "(RayWorkerWrapper pid=67451, ip=10.1.0.7) ERROR 06-25 15:28:30 worker_base.py:148] "
        "Error executing method determine_num_available_blocks.",
        "(VllmWorker rank=1 pid=102) ERROR 04-14 14:24:52 [multiproc_executor.py:383] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 298.00 MiB. GPU 1 has "
        "a total capacity of 79.25 GiB of which 110.75 MiB is free.",
        "(EngineCore_DP0 pid=90) ERROR 04-14 14:24:53 [core.py:390] EngineCore failed to start.",
        "(EngineCore_DP0 pid=90) RuntimeError: Engine core initialization failed. See root "
        "cause above.",
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.rule == "cuda-oom-allocate"
        assert diagnosis.evidence.line == 5


MESSAGE = "ValueError: No available memory for the cache blocks."


@pytest.mark.parametrize(
    "raw",
    [
        f"> {MESSAGE}",
        f"> > {MESSAGE}",
        f"12 | {MESSAGE}",
        f"  12: {MESSAGE}",
        f"1234\t{MESSAGE}",
        f"vllm-1  | {MESSAGE}",
        f"[pod/vllm-7d9f-x2/vllm] {MESSAGE}",
        f"{MESSAGE}\r\n",
        f"\x1b]0;title\x07{MESSAGE}",
        f"\x1b]8;;http://x\x1b\\{MESSAGE}",
        f"2024-05-01T12:00:00.123456789Z stderr F {MESSAGE}",  # a CRI log file
        f"2024-05-01T12:00:00Z stdout P {MESSAGE}",
        f"    (EngineCore_DP0 pid=12) {MESSAGE}",  # a Markdown code block
        f"\t[rank0]: {MESSAGE}",
        f"    INFO 04-27 10:13:05 llm_engine.py:275] {MESSAGE}",
        f"[2024-05-01 12:00:00] {MESSAGE}",
        f"2024/05/01 12:00:00.123 {MESSAGE}",
        f"12:00:00 {MESSAGE}",
        f"2024-05-01 12:00:00,123 - vllm.engine - ERROR - {MESSAGE}",
        f"[stderr] {MESSAGE}",
        f"stderr: {MESSAGE}",
        f"| {MESSAGE}",
    ],
)
def test_paste_markers_are_stripped(raw):
    assert normalize(raw) == MESSAGE


@pytest.mark.parametrize(
    "line",
    ['  File "/x/vllm/config.py", line 3, in check', "    raise ValueError(msg)", "\tat x"],
)
def test_an_indent_without_a_prefix_after_it_is_kept(line):
    assert normalize(line) == line


def test_numbers_that_start_a_message_are_not_line_numbers():
    assert normalize("404 Client Error: Not Found for url: x") == (
        "404 Client Error: Not Found for url: x"
    )


def test_an_unterminated_osc_sequence_is_dropped_up_to_the_next_escape():
    assert strip_ansi("\x1b]0;never ends") == ""
    assert strip_ansi("\x1b]0;a\x1b[31mred") == "red"
    # Many unterminated sequences: each character is read a bounded number of times.
    assert strip_ansi("\x1b]" * 100_000 + "ok") == ""


def test_windows_line_ends():
    lines = [line + "\r" for line in TRACEBACK]
    live, from_file = _both_ways(lines)
    assert live == from_file
    assert live.rule == "gpu-free-memory-below-utilization"


def test_a_log_cut_inside_a_traceback_is_a_failure_not_a_start():
    lines = TRACEBACK[:2]  # the paste stops before the exception line
    for diagnosis in _both_ways(lines):
        assert diagnosis.failed and not diagnosis.permanent  # no message: a cut paste
        # Judged by where it was raised when the frames name a catalogued function
        # (rules/95-provenance.yaml), else by the log's shape.
        if diagnosis.rule == "log-ends-in-traceback":
            assert "ends inside a Python traceback" in diagnosis.cause
        else:
            assert diagnosis.rule.startswith("raised-in-"), diagnosis.rule
            assert "gpu_worker.py" in diagnosis.message


def test_a_traceback_the_start_went_on_from_is_not_a_failure():
    lines = [
        *TRACEBACK[:2],
        "(EngineCore_DP0 pid=167) INFO 02-28 16:12:20 [gpu_model_runner.py:1] Model loading "
        "took 5.2 GiB",
    ]
    assert not Classifier(PACK).feed_all(lines).diagnosis().failed


@pytest.mark.parametrize("keep", [3, 5, 10, 20])
def test_elided_pastes_keep_their_verdict(keep):
    """Only the last lines of a log: the verdict stands on what is left."""
    log = [
        "INFO 04-06 18:43:17 [api_server.py:1] vLLM API server version 0.8.3",
        *[f"INFO 04-06 18:43:17 [config.py:1] line {n}" for n in range(30)],
        *TRACEBACK,
        "(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866] EngineCore failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}",
    ]
    tail = log[-keep:]
    diagnosis = Classifier(PACK).feed_all(tail).diagnosis()
    assert diagnosis.failed
    if any("Free memory" in line for line in tail):
        assert diagnosis.rule == "gpu-free-memory-below-utilization"


def test_a_wrapped_message_whose_parts_match_nothing_alone():
    line = (
        "(VllmWorker-0 pid=11040) ERROR 11-29 18:39:51 [multiproc_executor.py:953] ValueE"
        "rror: Available memory on node 0 (7.48/10.21 GiB) on startup is less than desired CPU "
        "memory utilization (0.9, 9.19 GiB). Decrease memory utilization."
    )
    lines = ["INFO 11-29 18:39:50 [x.py:1] starting", *_wrap(line, 80), "Killed"]
    rule = PACK.by_id("host-memory-exhausted")
    assert not any(rx.search(normalize(part)) for rx in rule.patterns for part in lines)
    for diagnosis in _both_ways(lines):
        assert diagnosis.rule == "host-memory-exhausted"
        assert diagnosis.evidence.line == 2


@pytest.mark.parametrize(
    "warning",
    [
        "WARNING 03-12 18:19:00 [modeling_rope_utils.py:577] `rope_scaling`'s factor field "
        "must be a float >= 1, got 0.5",
        "WARNING 03-12 18:19:00 [x.py:1] Please install flash-attn for faster attention",
        "WARNING 03-12 18:19:00 [x.py:1] hf_transfer is not installed. Please install it for "
        "faster downloads",
    ],
)
def test_the_same_words_in_a_warning_are_not_a_failure(warning):
    """Rules for wordings that libraries also log as warnings need the exception line."""
    assert not Classifier(PACK).feed_all([warning]).diagnosis().failed


@pytest.mark.parametrize(
    "line",
    [
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
        "torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable",
    ],
)
def test_an_exception_class_named_otherwise_is_known_by_its_module(line):
    """A class whose name does not end in Error/Exception, printed as Python prints an
    uncaught exception (module.Class: message), ends the start like any other."""
    diagnosis = classify_lines(["INFO 01-01 00:00:00 [loader.py:20] Loading weights", line])
    assert diagnosis.failed and diagnosis.rule == "unhandled-exception"
    assert diagnosis.cause.endswith(line.split(": ", 1)[1])


@pytest.mark.parametrize(
    "line",
    [
        "huggingface_hub.file_download: Downloading model.safetensors",
        "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 7 closing",
    ],
)
def test_a_logger_named_by_its_module_is_not_an_exception(line):
    diagnosis = classify_lines(["INFO 01-01 00:00:00 [loader.py:20] Loading weights", line])
    assert not diagnosis.failed


ACCESS_STATUSES = [
    "401 Unauthorized",  # vLLM started with --api-key, a client without it
    "403 Forbidden",
    "404 Not Found",  # a client asking for a model name vLLM does not serve
    "429 Too Many Requests",
    "500 Internal Server Error",
    "503 Service Unavailable",
]


@pytest.mark.parametrize("status", ACCESS_STATUSES)
@pytest.mark.parametrize(
    "prefix", ["INFO:     ", "(APIServer pid=1) INFO:     ", "vllm-1     | INFO:     "]
)
def test_a_server_access_line_is_never_a_cause(status, prefix):
    """The status in an HTTP server's access line is its answer to a client (vLLM's API
    server, a proxy beside it), not the hub's: a served worker whose clients get 401 or
    404 stays ready, whatever the hub rules read in those words."""
    lines = [
        "INFO 11-29 18:40:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
        f'{prefix}172.20.0.3:48720 - "POST /v1/chat/completions HTTP/1.1" {status}',
        f'{prefix}172.20.0.3:48722 - "GET /v1/models HTTP/1.1" 200 OK',
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.state is State.READY, (status, diagnosis.rule)


@pytest.mark.parametrize("status", ACCESS_STATUSES)
def test_an_access_line_with_a_servers_own_field_is_never_a_cause(status):
    """A server's access format may put a field after the client (KServe's "1" before
    the dash, held-out RU): still its answer to a client."""
    lines = [
        "INFO 11-12 09:14:28 model_runner.py:1523] Graph capturing finished in 12 secs.",
        "2024-11-12 09:14:28.517 uvicorn.error INFO:     Application startup complete.",
        "2024-11-12 09:15:41.009 uvicorn.access INFO:     10.244.1.14:38866 1 - "
        f'"POST /openai/v1/chat/completions HTTP/1.1" {status}',
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.state is State.READY, (status, diagnosis.rule)


@pytest.mark.parametrize("path", ["/v1/models", "/health", "/v1/chat/completions"])
def test_a_client_that_cannot_reach_vllms_api_is_not_the_hub(path):
    """urllib3's report of a client waiting for vLLM (a task queue's warm-up, a web UI):
    the path is the server's API, never the hub's; vLLM's own cause decides."""
    lines = [
        "INFO 06-11 14:06:07 api_server.py:177] vLLM API server version 0.4.3",
        "[2024-06-11 14:06:08,402: WARNING/ForkPoolWorker-1] LLM backend not reachable yet: "
        f"HTTPConnectionPool(host='127.0.0.1', port=8000): Max retries exceeded with url: {path}"
        " (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object>: Failed "
        "to establish a new connection: [Errno 111] Connection refused'))",
        "ValueError: Total number of attention heads (40) must be divisible by tensor parallel "
        "size (3).",
    ]
    for diagnosis in _both_ways(lines):
        assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)


@pytest.mark.parametrize(
    ("line", "category"),
    [
        (
            "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
            "https://huggingface.co/api/models/org/missing/revision/main",
            Category.MODEL_NOT_FOUND,
        ),
        ("huggingface_hub.errors.HfHubHTTPError: 404 Not Found", Category.MODEL_NOT_FOUND),
        ("requests.exceptions.HTTPError: 401 Unauthorized", Category.GATED_MODEL),
    ],
)
def test_a_hub_status_outside_an_access_line_still_reads_by_its_code(line, category):
    diagnosis = classify_lines(["Traceback (most recent call last):", line])
    assert diagnosis.category is category, diagnosis.rule


# An offline LLM(...) prints no ready marker until it processes prompts: the last step of
# its engine's initialisation is its ready, unless the log shows the API server.
ENGINE = [
    "INFO 06-05 12:31:20 llm_engine.py:161] Initializing an LLM engine (v0.4.3) with config: "
    "model='m', tokenizer='m'",
    "INFO 06-05 12:32:41 model_runner.py:146] Loading model weights took 7.1183 GB",
    "INFO 06-05 12:32:44 gpu_executor.py:83] # GPU blocks: 812, # CPU blocks: 682",
]
CAPTURED = "INFO 06-05 12:33:07 model_runner.py:924] Graph capturing finished in 21 secs."
INITIALISED = (
    "INFO 06-05 12:33:08 [core.py:1] init engine (profile, create kv cache, warmup model) took "
    "35.20 seconds"
)
SERVER = {
    "version": "INFO 06-05 12:31:19 api_server.py:177] vLLM API server version 0.4.3",
    "args": "INFO 06-05 12:31:19 api_server.py:178] args: Namespace(host=None, port=8000)",
    "serve": "(APIServer pid=1) INFO 06-05 12:31:19 [utils.py:1] non-default args: "
    "{'model_tag': 'm', 'model': 'm'}",
}


@pytest.mark.parametrize("last", [CAPTURED, INITIALISED], ids=["graphs", "init-engine"])
def test_an_offline_engine_that_finished_initialising_is_up(last):
    offline_args = "INFO 06-05 12:31:19 [utils.py:1] non-default args: {'model': 'm'}"
    for lines in ([*ENGINE, last], [offline_args, *ENGINE, last]):
        for diagnosis in _both_ways(lines):
            assert diagnosis.state is State.READY, diagnosis


@pytest.mark.parametrize("server", SERVER.values(), ids=SERVER.keys())
@pytest.mark.parametrize("last", [CAPTURED, INITIALISED], ids=["graphs", "init-engine"])
def test_a_server_whose_engine_is_up_is_still_loading(server, last):
    for diagnosis in _both_ways([server, *ENGINE, last]):
        assert diagnosis.state is State.LOADING, diagnosis


def test_an_eager_offline_engine_is_up_once_its_kv_cache_is_sized():
    """No graphs to capture: "# GPU blocks" is the last step of an engine configured
    enforce_eager=True (vLLM before 0.6.4 prints nothing after it)."""
    eager = [ENGINE[0] + ", enforce_eager=True, kv_cache_dtype=auto", *ENGINE[1:]]
    for diagnosis in _both_ways(eager):
        assert diagnosis.state is State.READY, diagnosis
    graphs = [ENGINE[0] + ", enforce_eager=False, kv_cache_dtype=auto", *ENGINE[1:]]
    for diagnosis in _both_ways(graphs):  # its graphs are still to be captured
        assert diagnosis.state is State.LOADING, diagnosis
    for diagnosis in _both_ways([SERVER["args"], *eager]):
        assert diagnosis.state is State.LOADING, diagnosis


def test_an_engine_not_yet_up_or_failed_after_it_is_not_ready():
    for diagnosis in _both_ways(ENGINE):
        assert diagnosis.state is State.LOADING
    failed = [*ENGINE, CAPTURED, "Traceback (most recent call last):", "RuntimeError: boom"]
    for diagnosis in _both_ways(failed):
        assert diagnosis.state is State.FAILED_TRANSIENT
    # vLLM gone (the worker's view): an engine that came up and exited failed
    classifier = Classifier(PACK).feed_all([*ENGINE, CAPTURED])
    assert classifier.diagnosis(exited=True).state is State.FAILED_TRANSIENT


@pytest.mark.parametrize("prefix", ["", "(EngineCore_0 pid=12) "])
@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_a_message_of_a_terminals_width_is_not_joined_with_the_next_record(width, prefix):
    """An exception line that happens to be exactly a common width looks cut by a
    terminal; the next line begins with vLLM's logger header, a record of its own (the
    rest of a cut message never begins with one): it is not the message going on."""
    opening, ending = "AttributeError: Model ", " does not support BitsAndBytes quantization yet."
    message = opening + "M" * (width - len(opening) - len(ending)) + ending
    assert len(message) == width and wrapped_at_width(message)
    lines = [
        "Traceback (most recent call last):",
        message,
        f"{prefix}ERROR 10-05 12:33:37 api_server.py:188] RPCServer process died before "
        "responding to readiness probe",
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.category is Category.MODEL_REQUIREMENT, diagnosis
        assert diagnosis.evidence is not None and diagnosis.evidence.text == message


HEADERS = {
    "bare": "",
    "v0-engine": "ERROR 10-28 04:13:11 engine.py:390] ",
    "v1-engine-core": "(EngineCore_0 pid=287) ERROR 08-27 11:51:37 [core.py:700] ",
}


@pytest.mark.parametrize("header", HEADERS.values(), ids=HEADERS.keys())
def test_one_records_message_over_several_lines_under_its_header_is_read_whole(header):
    """vLLM's logger repeats a record's header on every line of a multi-line message
    (its NewLineFormatter): the same header on the next line is the message going on.
    vLLM's kernel chooser lists each kernel's reason on a line of its own; the reason
    that names a setting decides (a whole catalogued message in the continuation)."""
    lines = [
        f"{header}Traceback (most recent call last):",
        f"{header}ValueError: Failed to find a kernel that can implement the WNA16 linear "
        "layer. Reasons: ",
        f"{header} MacheteLinearKernel cannot implement due to: Machete requires compute "
        "capability of 90 (current capability: 80)",
        f"{header} MarlinLinearKernel cannot implement due to: Weight "
        "input_size_per_partition = 3696 is not divisible by min_thread_k = 128. Consider "
        "reducing tensor_parallel_size or running with --quantization gptq.",
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.category is Category.BAD_CONFIG, diagnosis
        assert diagnosis.evidence is not None and diagnosis.evidence.line == 2


def test_another_record_under_the_same_header_after_a_traceback_line_is_not_the_message():
    """The record's traceback, under the same header, is not its message going on."""
    header = HEADERS["v0-engine"]
    lines = [
        f"{header}No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        f"{header}Traceback (most recent call last):",
        f'{header}  File "/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py", line 1',
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.category is Category.KV_CACHE


def test_a_requests_bare_keyerror_after_ready_is_not_a_cause():
    """A bare KeyError on a lower-case name reads as a model type before ready; after it,
    a request handler's KeyError (a chat message without 'content', held-out SM) in a
    server that goes on serving leaves the server up."""
    lines = [
        "INFO 11-29 18:40:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
        "ERROR 08-07 03:18:02 [serving_chat.py:215] Error in preprocessing prompt inputs",
        "ERROR 08-07 03:18:02 [serving_chat.py:215] Traceback (most recent call last):",
        "ERROR 08-07 03:18:02 [serving_chat.py:215] KeyError: 'content'",
        'INFO:     10.42.3.17:51540 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
        "INFO 08-07 03:18:06 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    ]
    for diagnosis in _both_ways(lines):
        assert diagnosis.state is State.READY, diagnosis.rule
    before = _both_ways(
        ["INFO 05-01 [api_server.py:1] vLLM API server version 0.3.0", "KeyError: 'mistral'"]
    )
    assert all(str(d.category) == "model_requirement" for d in before)
