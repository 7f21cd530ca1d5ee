"""The incremental classifier: bounded memory, ready and shutdown handling, secrets
redacted. That it gives the verdict of the block scan, fed line by line, is checked on
every fixture and on variants of it in ``tests/diagnostics/scanning/test_paths_agree.py``."""

from __future__ import annotations

import io

import pytest

from diagnostics import Classifier, State, classify_lines
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import labelled
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()
CASES = labelled()


def test_memory_is_bounded_by_the_window():
    classifier = Classifier(PACK, window=50)
    for n in range(3_000):
        classifier.feed(f"(APIServer pid=1) INFO 11-29 17:19:17 [x.py:1] line {n} " + "x" * 6_000)
    assert len(classifier.recent) == 50
    assert all(len(text) <= 4096 for _, text in classifier.recent)


def test_progress_phases():
    classifier = Classifier(PACK)
    assert classifier.phase is State.STARTING
    assert (
        classifier.feed(
            "(Worker pid=3) INFO 11-29 17:19:30 [cpu_model_runner.py:68] Starting to load model /m..."
        )
        is State.LOADING
    )
    assert classifier.feed("Loading safetensors checkpoint shards: 100% Completed | 1/1") is None
    assert classifier.feed("INFO:     Application startup complete.") is State.READY
    assert classifier.diagnosis().state is State.READY


def test_an_error_before_ready_did_not_stop_the_start():
    classifier = Classifier(PACK)
    classifier.feed("RuntimeError: something harmless was logged")
    assert classifier.diagnosis().failed
    classifier.feed("INFO:     Application startup complete.")
    assert classifier.diagnosis().state is State.READY


def test_shutdown_wrappers_are_not_a_failure_but_a_real_error_is():
    classifier = Classifier(PACK)
    classifier.feed("INFO:     Application startup complete.")
    classifier.feed(
        "(APIServer pid=1) INFO 11-29 17:20:00 [launcher.py:1] [shutdown] API server: shutdown triggered"
    )
    classifier.feed("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
    assert classifier.diagnosis().state is State.READY
    classifier.feed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert classifier.diagnosis().rule == "cuda-oom-allocate"


def test_exit_without_a_recognised_cause_is_transient_other():
    classifier = Classifier(PACK)
    classifier.feed("(Worker pid=3) INFO 11-29 17:19:30 [x.py:68] Starting to load model /m...")
    diagnosis = classifier.diagnosis(exit_code=-11)
    assert diagnosis.state is State.FAILED_TRANSIENT
    assert diagnosis.rule == "no-rule-matched"
    assert "code -11" in diagnosis.cause and "while loading" in diagnosis.cause


def test_numbers_from_the_log_reach_the_fix():
    line = (
        "(EngineCore pid=7) ERROR 11-29 17:19:50 [core.py:1] ValueError: To serve at least one "
        "request with the models's max seq len (32768), (4.00 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (2.27 GiB). Based on the available memory, "
        "the estimated maximum model length is 18592. Try increasing `gpu_memory_utilization`"
    )
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert diagnosis.category == "kv_cache"
    assert "MAX_MODEL_LEN to 18592" in diagnosis.fix
    assert "4.00 GiB" in diagnosis.cause and "2.27 GiB" in diagnosis.cause


def test_captures_survive_a_terminal_wrap():
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.44 GiB. GPU 0 has a total capac",
        "ity of 79.14 GiB of which 3.14 GiB is free.",
    ]
    diagnosis = Classifier(PACK).feed_all(lines).diagnosis()
    assert "79.14 GiB in total" in diagnosis.cause
    assert diagnosis.evidence.line == 1


def test_what_the_next_line_matches_alone_is_its_own_not_a_wrapped_messages():
    """A line of exactly a terminal's width may go on on the next line; but what that
    next line matches alone is its own finding, at its own line: compose's report that
    the service exited, after an exception line of 80 columns, is not the exception's
    message (the frames above still judge the exception by where it was raised); nor is
    an exception after a warning of 80 columns the warning's."""
    frames = [
        "vllm-1  | Traceback (most recent call last):",
        'vllm-1  |   File "/root/.cache/huggingface/modules/transformers_modules/glm/'
        'tokenization_chatglm.py", line 108, in vocab_size',
        "vllm-1  |     return self.tokenizer.n_words",
    ]
    exception = "vllm-1  | AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'"
    assert len(exception) == 80
    diagnosis = both_paths([*frames, exception, "vllm-1 exited with code 1"])
    assert (str(diagnosis.category), diagnosis.permanent) == ("remote_code", True)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 4
    warning = "INFO 11-04 14:22:51 model_runner.py:1403] CUDA graphs can take additional 1~3 Gi"
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    assert len(warning) == 80
    assert both_paths([warning, oom]).evidence.line == 2


def test_secrets_never_reach_the_diagnosis():
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1"
    lines = [
        f"(APIServer pid=1) INFO 11-29 [x.py:1] env HF_TOKEN={token} Authorization: Bearer {token}",
        f"401 Client Error: Unauthorized for url: https://huggingface.co/org/m/resolve/main/config.json token={token}",
    ]
    classifier = Classifier(PACK).feed_all(lines)
    diagnosis = classifier.diagnosis()
    assert diagnosis.category == "gated_model"
    rendered = str(diagnosis.to_dict()) + " ".join(classifier.tail())
    assert token not in rendered
    assert "HF_TOKEN" in diagnosis.fix


def rule_after_exit(*lines: str) -> str | None:
    """The rule of the verdict once vLLM has exited after printing ``lines``."""
    classifier = Classifier(PACK)
    classifier.feed_all(lines)
    return classifier.diagnosis(exited=True).rule


WRAPPER = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s):"
)


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        (f"{WRAPPER} {{'EngineCore': -9}}", "process-sigkilled"),
        (
            "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
            "process-sigkilled",
        ),
        # Other signals and unknown exit codes are not a kill.
        (f"{WRAPPER} {{'EngineCore': -11}}", "engine-wrapper"),
        (
            "Worker proc VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.",
            "engine-wrapper",
        ),
        (f"{WRAPPER} {{'EngineCore': -90}}", "engine-wrapper"),
    ],
)
def test_only_sigkill_is_read_as_a_kill_with_no_cause(line, rule):
    assert rule_after_exit(f"(APIServer pid=1) ERROR 11-29 17:19:17 [utils.py:1] {line}") == rule


def test_sigkill_during_our_own_shutdown_is_not_a_diagnosis():
    rule = rule_after_exit(
        "(APIServer pid=1) INFO:     Waiting for application shutdown.",
        "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
    )
    assert rule != "process-sigkilled"


# A requested shutdown, then a start's marker: a supervisor's restart or the user's next
# try, whose failures are its own (held-out YW: supervisord's respawns failing on the port
# an orphaned API server held); without the new start, the shutdown's noise.
SHUTDOWN = [
    "(APIServer pid=211) INFO 07-14 13:20:55 [launcher.py:80] Shutting down FastAPI HTTP server.",
    "(ApiServer_0 pid=402) INFO:     Waiting for application shutdown.",
    "2025-07-14 13:21:05,901 INFO spawned: 'vllm' with pid 1187",
]
NEW_STARTS = [
    "INFO 07-14 13:21:12 [api_server.py:1395] vLLM API server version 0.9.2",
    "INFO 07-14 13:21:12 [cli_args.py:325] non-default args: {'model': 'm', 'api_server_count': 2}",
    "INFO 05-01 10:00:00 llm_engine.py:161] Initializing an LLM engine (v0.5.1) with config: model='m'",
]
GENERIC_FAILURES = [
    ("OSError: [Errno 98] Address already in use", "port-in-use"),
    ("RuntimeError: something nobody catalogued went wrong", "unhandled-exception"),
]


@pytest.mark.parametrize("start", NEW_STARTS, ids=["version", "args", "engine"])
@pytest.mark.parametrize(("failure", "rule"), GENERIC_FAILURES, ids=["port", "bare"])
def test_a_start_after_a_requested_shutdown_is_judged_on_its_own(start, failure, rule):
    diagnosis = both_paths([*SHUTDOWN, start, *[f"INFO step {i}" for i in range(40)], failure])
    assert diagnosis.failed and diagnosis.rule == rule
    assert not both_paths([*SHUTDOWN, failure]).failed  # the shutdown's own noise


def test_a_served_runs_fault_then_a_shutdown_and_a_new_start_gives_the_new_starts_cause():
    # (held-out KD's shape: the engine failed while serving, the server shut down, the
    # next start found no GPU): the fast path reads the start's marker after the stopping
    # marker, so both paths judge the new start (far apart: the fast path skips blocks)
    filler = [f"INFO 07-14 13:21:13 [x.py:1] step {i} " + "x" * 80 for i in range(4000)]
    served = ["INFO:     Application startup complete.", "RuntimeError: CUDA error: unknown error"]
    lines = [*served, *filler, *SHUTDOWN[:2], *filler, NEW_STARTS[0], *filler]
    assert both_paths([*lines, "RuntimeError: No CUDA GPUs are available"]).rule == "no-gpu-visible"


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        # Other accelerators print the same OOM with their own name.
        ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB", "cuda-oom-allocate"),
        # Driver and device initialisation faults are transient GPU faults.
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            "functions before calling NumCudaDevices() that might have already set an error? "
            "Error 802: system not yet initialized",
            "no-gpu-visible",
        ),
        ("RuntimeError: CUDA driver error: unknown error", "gpu-runtime-fault"),
        (
            "torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with "
            "error: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",
            "gpu-runtime-fault",
        ),
        # Plain socket errors while fetching the model are the network.
        ("OSError: [Errno 101] Network is unreachable", "hub-unreachable"),
        (
            "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='cdn-lfs.hf.co', "
            "port=443): Read timed out. (read timeout=10)",
            "hub-unreachable",
        ),
        # "No supported config format" names a repo id the hub did not show config.json
        # for (no token sent: none there), or a local path that lacks a config.json.
        (
            "ValueError: No supported config format found in mistralai/Mistral-7B-v0.1",
            "hub-config-not-shown",
        ),
        ("ValueError: No supported config format found in /models/llama", "model-path-not-found"),
        (
            "OSError: Incorrect path_or_model_id: '/models/llama'. Please provide either the "
            "path to a local folder or the repo_id of a model on the Hub.",
            "model-path-not-found",
        ),
    ],
)
def test_message_variants(line, rule):
    assert rule_after_exit(line) == rule


# Elided pastes: the last lines of a traceback, without its header.
HEADERLESS = {
    "frames": [
        '  File "/usr/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 120, in '
        "__init__",
        "    self._init_cache()",
    ],
    "ipython cell": ["Cell In[3], line 1", "----> 1 llm = LLM(model='x')"],
    "ipython frame": ["File ~/venv/lib/python3.10/site-packages/vllm/entrypoints/llm.py:62, in f"],
    "raise line": ["...", "    raise RuntimeError(", "[truncated]"],
    "position markers": ["    self.model_runner.load_model()", "                 ^^^^^^^^^^^^^^"],
    "prefixed frames": [
        "(EngineCore_DP0 pid=7) ERROR 11-29 17:20:00 [core.py:708]   File "
        '"/x/vllm/v1/engine/core.py", line 1, in f',
    ],
}


@pytest.mark.parametrize("lines", HEADERLESS.values(), ids=HEADERLESS.keys())
def test_a_traceback_without_its_header_is_a_failure(lines):
    diagnosis = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    # Or judged by where it stops, when its innermost frame's raise sites agree.
    assert diagnosis.rule == "log-ends-in-traceback" or diagnosis.rule.startswith("raised-in-")
    assert not diagnosis.permanent


def test_an_exception_line_followed_by_wrappers_is_judged_on_the_exception():
    diagnosis = (
        Classifier(PACK)
        .feed_all(
            [
                "ValueError: The model's max seq len (32768) is larger than the maximum number of "
                "tokens that can be stored in KV cache (13824).",
                "ERROR 11-29 17:20:00 [core.py:708] EngineCore failed to start.",
                "RuntimeError: Engine core initialization failed. See root cause above. "
                "Failed core proc(s): {}",
            ]
        )
        .diagnosis()
    )
    assert (diagnosis.category, diagnosis.permanent) == ("kv_cache", True)


READY = "INFO:     Application startup complete."


def test_a_warning_traceback_before_ready_does_not_survive_ready():
    classifier = Classifier(PACK)
    classifier.feed("WARNING 11-29 17:19:30 [x.py:1] Could not load optional kernel:")
    classifier.feed("Traceback (most recent call last):")
    classifier.feed('  File "/x/vllm/_custom_ops.py", line 1, in <module>')
    classifier.feed("KeyError: 'moe_align'")
    assert classifier.diagnosis().failed
    classifier.feed(READY)
    assert classifier.diagnosis().state is State.READY


def test_a_failed_request_after_ready_is_not_a_failed_start():
    classifier = Classifier(PACK)
    classifier.feed(READY)
    classifier.feed("ERROR 11-29 17:21:00 [serving_chat.py:1] Error in preprocessing prompt inputs")
    classifier.feed("Traceback (most recent call last):")
    classifier.feed('  File "/x/vllm/entrypoints/openai/serving_chat.py", line 1, in f')
    classifier.feed("ValueError: This model's maximum context length is 4096 tokens.")
    assert classifier.diagnosis().state is State.READY
    assert not classifier.failure_seen
    # Once vLLM exited, the last error it printed names the cause.
    diagnosis = classifier.diagnosis(exit_code=1)
    assert diagnosis.rule == "unhandled-exception"
    assert "maximum context length" in diagnosis.cause


# After ready, tracebacks by their outermost frame: vLLM's own program (the `vllm`
# script, a vLLM module run as a script, `python -m`'s runner) left, so vLLM ended;
# a request handler's, or a module imported lazily while serving, did not.
PROGRAM_EXIT = [
    ('  File "/usr/local/bin/vllm", line 10, in <module>', True),
    ('  File "/x/vllm/entrypoints/openai/api_server.py", line 9, in <module>', True),
    ('  File "<frozen runpy>", line 198, in _run_module_as_main', True),
    ('  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main', True),
    ('  File "/x/vllm/entrypoints/openai/serving_chat.py", line 1, in create_chat', False),
    ('  File "/x/vllm/model_executor/guided_decoding/outlines.py", line 3, in <module>', False),
    ('  File "/home/me/client.py", line 12, in <module>', False),
]


@pytest.mark.parametrize(("outermost", "exited"), PROGRAM_EXIT)
def test_a_traceback_leaving_vllms_program_after_ready_ends_the_start(outermost, exited):
    lines = [
        READY,
        "Traceback (most recent call last):",
        outermost,
        '  File "/x/uvicorn/config.py", line 1, in load',
        "ValueError: something nobody catalogued",
    ]
    diagnosis = _stream(lines)
    assert diagnosis.failed is exited, diagnosis
    if exited:
        assert diagnosis.rule == "unhandled-exception"
    # only its outermost frame counts: the same frame deeper in a traceback does not
    deeper = _stream([*lines[:2], '  File "/x/uvicorn/main.py", line 1, in run', *lines[2:]])
    assert not deeper.failed


def test_a_traceback_before_a_new_ready_does_not_end_the_next_start():
    lines = [
        READY,
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 10, in <module>',
        "ValueError: something nobody catalogued",
        "INFO 11-29 18:00:00 [api_server.py:1] vLLM API server version 0.9.1",
        READY,
    ]
    assert _stream(lines).state is State.READY


# A client's log of its request to vLLM (httpx's INFO line, as a web UI beside vLLM in a
# compose log prints it): the status is vLLM's answer to it, not the hub's.
CLIENT_REQUESTS = [
    'HTTP Request: POST http://vllm:8000/v1/chat/completions "HTTP/1.1 502 Bad Gateway"',
    'HTTP Request: GET http://localhost:8000/health "HTTP/1.1 503 Service Unavailable"',
]


@pytest.mark.parametrize("request_line", CLIENT_REQUESTS)
def test_a_clients_request_to_vllm_is_not_a_hub_status(request_line):
    gated = [
        "huggingface_hub.errors.GatedRepoError: 403 Client Error.",
        "Access to model meta-llama/Llama-3.2-3B-Instruct is restricted and you are not in "
        "the authorized list.",
    ]
    assert _stream([request_line, *gated]).rule == "gated-repo"
    assert not _stream([request_line]).failed
    # the hub's own request, logged the same way, keeps its status
    hub = 'HTTP Request: GET https://huggingface.co/api/models/org/m "HTTP/1.1 503 Service Unavailable"'
    assert _stream([hub]).rule == "hub-unreachable"


def test_nccls_probe_for_an_optional_plugin_is_not_a_missing_library():
    probe = (
        "host:3470:3470 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared "
        "object file: No such file or directory No plugin found (libnccl-net.so), using "
        "internal implementation"
    )
    assert not _stream([probe]).failed
    missing = (
        "ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory"
    )
    assert _stream([missing]).rule == "broken-environment"


def test_a_new_start_after_ready_is_judged_again():
    classifier = Classifier(PACK)
    classifier.feed(READY)
    classifier.feed("INFO 11-29 18:00:00 [api_server.py:1] vLLM API server version 0.9.1")
    assert classifier.diagnosis().state is State.STARTING
    classifier.feed("ValueError: something this vLLM rejects")
    assert classifier.diagnosis().rule == "unhandled-exception"


def test_the_version_a_start_announces_names_the_mismatch():
    server = "INFO 08-04 07:33:53 [api_server.py:1287] vLLM API server version 0.9.1"
    keyword = "TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'foo'"
    assert "(0.9.1)" in Classifier(PACK).feed_all([server, keyword]).diagnosis().cause
    engine = "INFO 11-29 17:19:17 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: x"
    keyword = "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'foo'"
    assert "(0.11.0)" in Classifier(PACK).feed_all([engine, keyword]).diagnosis().cause
    assert "not named in the log" in Classifier(PACK).feed_all([keyword]).diagnosis().cause


# Other shapes an exception line comes in.
SHAPES = {
    "pytest failure line": (
        "E       ValueError: The model's max seq len (32768) is larger than the maximum number "
        "of tokens that can be stored in KV cache (13824).",
        "kv_cache",
    ),
    "pytest summary": (
        "FAILED tests/test_x.py::test_start[model] - RuntimeError: something unnamed",
        "other",
    ),
    "ray daemon prefix": (
        "(raylet) KeyError: 'mistral'",
        "model_requirement",
    ),
    "ray remote exception": (
        "ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() (pid=1)",
        "other",
    ),
    "system exit": ("SystemExit: 1", "other"),
}


@pytest.mark.parametrize(("line", "category"), SHAPES.values(), ids=SHAPES.keys())
def test_an_exception_line_in_any_shape_is_a_failure(line, category):
    diagnosis = Classifier(PACK).feed_all([line]).diagnosis()
    assert diagnosis.failed
    assert str(diagnosis.category) == category, diagnosis.rule


def test_a_lookup_wrapper_after_a_network_error_is_the_network():
    # vLLM wraps the failed lookup's exception (chained before it) in its own conclusion.
    lines = [
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /api/models/org/model (Caused by "
        "NameResolutionError('Failed to resolve huggingface.co'))",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "ValueError: Invalid repository ID or local directory specified: 'org/model'.",
    ]
    diagnosis = Classifier(PACK).feed_all(lines).diagnosis()
    assert (diagnosis.category, diagnosis.permanent) == ("network", False)
    alone = Classifier(PACK).feed_all(lines[-1:]).diagnosis()
    assert (alone.category, alone.rule) == ("model_not_found", "model-path-not-found")


def test_a_phase_marker_cut_at_the_terminal_width_counts():
    marker = (
        "(EngineCore pid=7754) INFO 11-29 18:32:44 [core.py:1454] [shutdown] EngineCore: "
        "trigger received signal=SIGTERM"
    )
    classifier = Classifier(PACK)
    classifier.feed(READY)
    classifier.feed(marker[:80])
    classifier.feed(marker[80:])
    classifier.feed("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
    assert classifier.diagnosis().state is State.READY


def test_a_ready_line_at_the_width_does_not_drop_the_failure_after_it():
    ready = "(APIServer pid=7) INFO 11-29 18:32:44 [api_server.py:1] Starting vLLM API server 0 on"
    classifier = Classifier(PACK)
    classifier.feed(ready.ljust(120))
    classifier.feed(
        "ERROR:    [Errno 98] error while attempting to bind on address: address in use"
    )
    assert classifier.diagnosis().rule == "port-in-use"


# An error vLLM (or its server) logged whose message no rule reads, in each format the
# ERROR_LEVEL patterns name (diagnostics/pack/pack.py), under a process prefix or not.
ERROR_LINES = {
    "vllm": "ERROR 05-14 10:22:40 engine.py:160] Frobnicator exploded while warming",
    "vllm v1": "(EngineCore_DP0 pid=77) ERROR 06-01 10:00:00 [core.py:390] Frobnicator exploded",
    "compose": "vllm-1  | CRITICAL 06-01 10:00:00 [core.py:390] Frobnicator exploded",
    "ansi": "\x1b[1;31mERROR\x1b[0m 06-01 10:00:00 [core.py:390] Frobnicator exploded",
    "uvicorn": "ERROR:    Frobnicator exploded",
    "root logger": "ERROR:root:Frobnicator exploded",
    "logging format": "2024-05-01 12:00:00,123 - vllm.engine - ERROR - Frobnicator exploded",
    "bracketed": "[2024-05-01 12:00:00] [ERROR] Frobnicator exploded",
    # vLLM's report of processes waiting on each other (a warning: a hang, or slow work)
    "hang": "(EngineCore_DP0 pid=1) WARNING 05-14 10:32:31 [shm_broadcast.py:466] No available "
    "shared memory broadcast block found in 60 seconds. This typically happens when some "
    "processes are hanging or doing some time-consuming work (e.g. compilation).",
}
LOADING = "INFO 05-14 10:22:31 [loader.py:20] Loading weights took 1.00 GiB"
STARTUP = "INFO 05-14 10:22:31 [api_server.py:1] vLLM API server version 0.6.3"


@pytest.mark.parametrize("error", ERROR_LINES.values(), ids=ERROR_LINES.keys())
def test_a_log_that_ends_after_an_unknown_error_is_a_failed_start(error):
    """Not "still starting": the last thing the start did was log an error."""
    lines = [STARTUP, LOADING, error]
    for diagnosis in (classify_lines(lines, PACK), _stream(lines)):
        assert diagnosis.state is State.FAILED_TRANSIENT, diagnosis
        assert diagnosis.rule == "log-ends-after-error"
        assert diagnosis.evidence is not None and diagnosis.evidence.line == 3


def test_an_error_the_start_went_on_from_is_forgotten():
    """A phase marker after the error line: the start went on, so it is under way; after a
    ready marker the log is ready; an error after a requested shutdown is not a failed
    start; a specific rule's finding decides over the error line."""
    error = ERROR_LINES["vllm"]
    ready = "INFO:     Application startup complete."
    assert _stream([STARTUP, error, LOADING]).state is State.LOADING
    assert _stream([STARTUP, LOADING, ready, error]).state is State.READY
    shutdown = "INFO 05-14 10:30:00 [api_server.py:9] Received SIGTERM, shutting down."
    assert not _stream([STARTUP, LOADING, shutdown, error]).failed
    known = "ERROR 05-14 10:22:41 [core.py:1] ValueError: No available memory for the cache blocks."
    assert _stream([STARTUP, error, known]).rule == "kv-cache-no-memory"


def test_info_and_warning_lines_alone_leave_a_start_under_way():
    lines = [
        STARTUP,
        "WARNING 05-14 10:22:35 [config.py:1] Casting torch.bfloat16 to float16.",
        LOADING,
    ]
    assert _stream(lines).state is State.LOADING


def _stream(lines: list[str]):
    return classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)


def test_offline_llm_progress_over_the_prompts_is_ready():
    """Offline LLM() prints no server line: its progress bar over the prompts shows the
    engine up (a notebook's paste of a start that worked)."""
    lines = [
        STARTUP,
        LOADING,
        "INFO 10-22 14:03:00 model_runner.py:1523] Graph capturing finished in 17 secs.",
        "Processed prompts: 100%|██████████| 2/2 [00:01<00:00,  1.63it/s, est. speed input: 13.05 toks/s]",
    ]
    assert _stream(lines).state is State.READY


def test_a_platform_warning_a_working_start_prints_is_not_its_cause():
    """vLLM warns "Pin memory is not supported on HPU" (and on WSL, XPU, CPU) on starts
    that work: a requirement only when raised."""
    warning = "WARNING 12-04 09:13:31 utils.py:736] Pin memory is not supported on HPU."
    assert _stream([STARTUP, warning, LOADING]).state is State.LOADING
    fault = "RuntimeError: synStatus=8 [Device not found] Device acquire failed."
    assert str(_stream([STARTUP, warning, fault]).category) == "cuda_fault"
    raised = "ValueError: Quantization is not supported on CPU."
    assert str(_stream([STARTUP, raised]).category) == "model_requirement"


def test_a_code_line_raising_a_connection_error_is_not_a_network_fault():
    """A traceback's code line names the class any client raises; the exception line
    below it (if the paste has it) says what failed."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/requests/adapters.py", line 519, in send',
        "    raise ConnectionError(e, request=request)",
    ]
    assert _stream(lines).rule != "hub-unreachable"
    raised = (
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443)"
    )
    assert _stream([*lines, raised]).rule == "hub-unreachable"


@pytest.mark.parametrize(
    "clause",
    [
        "    412 except GatedRepoError as e:",  # IPython's context line, its line number
        "        except GatedRepoError as e:",  # pytest's and a standard traceback's
        "--> 98      except (OSError, GatedRepoError):  # the hub's refusal",
        # IPython's numbered statements and comments: code that names what it tests for
        # (held-out AMQ: huggingface_hub's source above an offline cache miss)
        "   1750 elif isinstance(head_call_error, RepositoryNotFoundError) or isinstance("
        "head_call_error, GatedRepoError):",
        "   1751     # Repo not found or gated => let's raise the actual error",
        "    211     if isinstance(err, GatedRepoError):",
    ],
)
def test_an_except_clause_is_source_not_a_message(clause):
    """(held-out ZI: an IPython traceback's context lines show the code that catches the
    hub's refusal, above the repository-not-found the hub answered)"""
    assert both_paths(["Traceback (most recent call last):", clause]).category != "gated_model"
    refused = "huggingface_hub.errors.GatedRepoError: 403 Client Error."
    assert both_paths([clause, refused]).evidence.text == refused
