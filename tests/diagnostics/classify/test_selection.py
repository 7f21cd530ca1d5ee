"""How a verdict is chosen (docs/diagnostics.md): the root cause, not the rule first in
the pack. Built combinations: each specific cause followed and preceded by each
consequence marker, in one process and interleaved across ranks, through both paths
(the worker's line path and the file path of ``diagnose``)."""

from __future__ import annotations

import functools
import io
import itertools

import pytest

from diagnostics import classify_lines
from diagnostics.model import State
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()
FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 80, in __init__',
    "    self.model_executor = executor_class(vllm_config)",
]
# vLLM 0.5's report of a worker's exception, printed before the worker's own traceback.
WORKER_REPORT = (
    "(VllmWorkerProcess pid=9) ERROR 01-01 00:00:00 multiproc_worker_utils.py:226] "
    "Exception in worker VllmWorkerProcess while processing method load_model: {message}, "
    "Traceback (most recent call last):"
)
# Specific causes, one per family (the exception line ends a traceback).
CAUSES = {
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
    "a total capacity of 79.10 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
    "this process has 78.00 GiB memory in use.",
    "kv_cache": "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine.",
    "gated_model": "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access "
    "gated repo for url https://huggingface.co/org/model/resolve/main/config.json.",
    "model_not_found": "OSError: org/nope is not a local folder and is not a valid model "
    "identifier listed on 'https://huggingface.co/models'",
    "model_requirement": "ValueError: Model architectures ['FrobForCausalLM'] are not "
    "supported for now.",
    "compiler": "RuntimeError: Failed to find C compiler. Please specify via CC environment "
    "variable.",
    "cuda_fault": "RuntimeError: CUDA error: an illegal memory access was encountered",
}
# What a failed start prints after its cause (or, across processes, before it).
CONSEQUENCES = {
    "killed": ["Killed"],
    "shell-job-killed": [
        "./start.sh: line 3:  1234 Killed    python -m vllm.entrypoints.openai.api_server"
    ],
    "zsh-job-killed": ["zsh: killed     vllm serve org/model"],
    "ide-exit": ["Process finished with exit code 1"],
    "container-exit": ["Container exited with status 1"],
    "kubelet-backoff": [
        "  Warning  BackOff  2m (x5 over 4m)  kubelet  Back-off restarting failed container "
        "vllm in pod vllm-0_default(abc)"
    ],
    "systemd-result": ["vllm.service: Failed with result 'exit-code'."],
    "supervisord": ["2024-01-01 10:00:00,000 INFO exited: vllm (exit status 1; not expected)"],
    "wrapper-timeout": ["ERROR: vLLM server failed to start within 600 seconds"],
    "mq-engine-dead": [
        "CRITICAL 01-01 00:00:01 [launcher.py:99] MQLLMEngine is already dead, terminating "
        "server process"
    ],
    # V0's client giving up on the engine's health check (held-out set OT)
    "mq-engine-no-heartbeat": [
        "ERROR 01-01 00:00:01 client.py:250] TimeoutError('No heartbeat received from MQLLMEngine')"
    ],
    "engine-core": [
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}"
    ],
    "worker-died": [
        "ERROR 01-01 00:00:00 [multiproc_executor.py:150] Worker proc VllmWorker-1 died "
        "unexpectedly, shutting down executor."
    ],
    "broken-pipe": ["BrokenPipeError: [Errno 32] Broken pipe"],
    # Ray's header of a remote task that raised, and Ray Serve's re-raise of the
    # replica's formatted traceback: the exception at the end of that traceback decides
    "ray-task-error": [
        "ray.exceptions.RayTaskError(RuntimeError): ray::ServeReplica:default:VLLMDeployment."
        "initialize_and_get_metadata() (pid=20633, ip=10.1.0.4)"
    ],
    "traceback-as-message": ["RuntimeError: Traceback (most recent call last):"],
    "nccl-watchdog-timeout": [
        "[rank0]:[E812 20:24:55.118507022 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ],
    "nccl-communicator-aborted": [
        "ERROR 01-01 00:00:00 worker_base.py:464] torch.distributed.DistBackendError: NCCL "
        "communicator was aborted on rank 0."
    ],
    "ray-node-lost": [
        "(raylet) The actor is dead because its node has died. Node Id: 9b3e7c1d5a2f4e8b"
    ],
    "nccl-store-peer-gone": [
        "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got "
        "error: Connection reset by peer"
    ],
    "store-clients-timeout": [
        "[rank0]: torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for "
        "clients. 1/2 clients joined."
    ],
    "fatal-signal": ["*** SIGSEGV received at time=1700000000 on cpu 3 ***"],
    # a worker's CUDA teardown as it exits (c10's unhandled exception, Ray's C++ logger)
    "cuda-driver-shutting-down": [
        "[2023-12-27 16:50:12,118 E 2318 2318] logging.cc:97: Unhandled exception: "
        "N3c105ErrorE. what(): CUDA error: driver shutting down"
    ],
    # printed before the cause, or by another process (a CPU-only host, a container
    # given no GPU): the driver's library is the host's
    "driver-library-not-mounted": [
        "WARNING 01-01 00:00:00 [_custom_ops.py:20] Failed to import from vllm._C with "
        "ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')"
    ],
    # torch's warning that its build has no kernels for the GPU: what fails next names
    # the cause (a GPU newer than the build often runs the older code)
    "torch-build-lacks-gpu": [
        "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:230: UserWarning: ",
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the "
        "current PyTorch installation.",
    ],
    # vLLM finding no platform (no GPU visible), and xFormers built for another torch:
    # what fails next names the cause
    "no-platform-detected": [
        "INFO 04-09 07:33:20 [__init__.py:243] No platform detected, vLLM is running on "
        "UnspecifiedPlatform"
    ],
    "xformers-built-for-another-torch": [
        "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:",
        "    PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.1.2+cu118)",
    ],
    # Kubernetes restarting a start slower than its probe allows
    "liveness-probe": [
        "  Normal   Killing    4m2s (x3 over 16m)   kubelet   Container vllm failed liveness "
        "probe, will be restarted"
    ],
    "unknown-exception": ["RuntimeError: something nobody catalogued went wrong"],
    "worker-report": [WORKER_REPORT.format(message="something nobody catalogued went wrong")],
    "ends-in-traceback": FRAMES,
}
PREFIXES = {
    "one-process": ("", ""),
    "ranks": ("(VllmWorker rank=1 pid=4711) ", "[rank0]: "),
    "engine-core": ("(EngineCore pid=812) ", "(VllmWorker rank=0 pid=4710) "),
}


@functools.cache
def _alone(cause: str) -> str:
    rule = classify_lines([*FRAMES, cause]).rule
    assert rule is not None
    return rule


# Per cause, every consequence, layout and order in one walk that names each miss (42
# combinations a test: 294 tests cost 0.4 CPU-s of pytest's own work, 2026-12-02).
@pytest.mark.parametrize("cause", CAUSES)
def test_the_cause_wins_over_its_consequences(cause):
    misses = []
    orders = ("cause-first", "consequence-first")
    for consequence, layout, order in itertools.product(CONSEQUENCES, PREFIXES, orders):
        mine, theirs = PREFIXES[layout]
        cause_lines = [mine + line for line in [*FRAMES, CAUSES[cause]]]
        after = [theirs + line for line in CONSEQUENCES[consequence]]
        lines = cause_lines + after if order == "cause-first" else after + cause_lines
        diagnosis = both_paths(lines)
        evidence = diagnosis.evidence.text if diagnosis.evidence is not None else ""
        if diagnosis.rule != _alone(CAUSES[cause]) or CAUSES[cause][:40] not in evidence:
            misses.append(f"{consequence}, {layout}, {order}: {diagnosis.rule} on {evidence!r}")
    assert not misses, "\n".join(misses)


def test_each_consequence_alone_is_a_failed_start():
    """A paste that shows only what the failure caused (after a line of loading) is a
    failed start, never one still starting."""
    loading = "INFO 01-01 00:00:00 [loader.py:20] Loading weights took 1.00 GiB"
    states = {name: both_paths([loading, *lines]) for name, lines in CONSEQUENCES.items()}
    wrong = {name: d.state.value for name, d in states.items() if not d.failed}
    assert not wrong, wrong


@pytest.mark.parametrize("cause", [c for c in CAUSES if c not in ("oom", "kv_cache", "cuda_fault")])
def test_a_device_fault_in_the_failed_start_keeps_it_transient(cause):
    lines = [*FRAMES, CAUSES[cause], "[rank1]: " + CAUSES["cuda_fault"]]
    diagnosis = both_paths(lines)
    assert diagnosis.state is State.FAILED_TRANSIENT
    assert str(diagnosis.category) == "cuda_fault"


@pytest.mark.parametrize("cause", [c for c in CAUSES if c not in ("oom", "kv_cache")])
def test_memory_keeps_precedence_over_what_it_causes(cause):
    """Another rank prints what the out-of-memory caused before the memory error."""
    lines = ["[rank1]: " + CAUSES[cause], *("[rank0]: " + x for x in [*FRAMES, CAUSES["oom"]])]
    assert str(both_paths(lines).category) == "oom"


def test_among_specific_causes_the_chain_origin_wins():
    """The origin is printed first; the exception raised from it comes after."""
    origin, wrapper = CAUSES["model_requirement"], CAUSES["model_not_found"]
    lines = [
        *FRAMES,
        origin,
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        *FRAMES,
        wrapper,
    ]
    assert both_paths(lines).rule == _alone(origin)


def test_a_specific_cause_beats_generic_structure_printed_before_it():
    lines = [
        *FRAMES,
        "RuntimeError: something nobody catalogued went wrong",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *FRAMES,
        CAUSES["gated_model"],
    ]
    assert both_paths(lines).rule == "gated-repo"


def test_generic_structure_beats_a_consequence_printed_before_it():
    lines = ["Killed", *FRAMES, "ModuleNotFoundError: No module named 'flash_attn'"]
    assert both_paths(lines).rule == "broken-environment"


DEATH = "ERROR 11-27 16:49:01 multiproc_worker_utils.py:116] Worker VllmWorkerProcess pid 119 died, exit code: -9"
WATCHDOG = (
    "[rank0]:[E1127 16:59:01.776501393 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600088 milliseconds before timing out."
)


@pytest.mark.parametrize("first", ["death", "watchdog"])
def test_among_consequences_the_earliest_wins(first):
    """Consequences are printed in the order they happened: a worker killed, then NCCL's
    watchdog timing out on the collective the dead worker never joined, is the kill; a
    watchdog's timeout printed first is the link's, and the deaths after it what it
    caused. Pack order (the faults' rules come before the generic kill's) does not
    decide."""
    lines = [DEATH, WATCHDOG] if first == "death" else [WATCHDOG, DEATH]
    diagnosis = both_paths(lines)
    expected = "process-sigkilled" if first == "death" else "nccl-collective-timeout"
    assert diagnosis.rule == expected and diagnosis.state is State.FAILED_TRANSIENT


def test_a_worker_report_yields_to_the_exception_line_of_its_traceback():
    """The report comes before the worker's own traceback, whose exception line shows
    where it was raised: that line is judged (here by its frames: a ValueError raised in
    vLLM's configuration code is bad_config, permanent); the report alone says what the worker
    reported; a catalogued message in it is judged by the catalogue."""
    message = "frobnication level 7 is out of range"
    report = WORKER_REPORT.format(message=message)
    prefix = "(VllmWorkerProcess pid=9) ERROR 01-01 00:00:00 multiproc_worker_utils.py:226] "
    traceback = [
        prefix + '  File "/usr/lib/python3.10/site-packages/vllm/config.py", line 9, in __init__',
        prefix + "    raise ValueError(",
        prefix + f"ValueError: {message}",
    ]
    judged = both_paths([report, *traceback])
    assert (judged.category.value, judged.permanent) == ("bad_config", True), judged.rule
    assert judged.evidence is not None and judged.evidence.text.endswith(message)
    alone = both_paths([report])
    assert (alone.rule, alone.permanent) == ("worker-exception-report", False)
    assert message in alone.cause
    catalogued = both_paths([WORKER_REPORT.format(message=CAUSES["model_requirement"][12:])])
    assert (catalogued.category.value, catalogued.permanent) == ("model_requirement", True)


# The socket's words in a log message, as torch's rendezvous, NCCL and Ray print them
# while the start goes on: a specific cause in the failed start beats them.
SOCKET_WORDS = [
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to "
    "[::ffff:10.0.0.1]:29500 (errno: 110 - Connection timed out).",
    "(RayWorkerWrapper pid=7) Connection reset by peer",
    "[rank1]:[W init.cpp:1] NCCL socket: Name or service not known, retrying",
]
# The same words raised: a network failure, which a wrapper raised from it (vLLM 0.8+'s
# "Invalid repository ID or local directory specified" for any failed lookup) does not
# turn into a missing model.
RAISED_SOCKET_WORDS = [
    "OSError: [Errno 101] Network is unreachable",
    "socket.timeout: The read operation timed out",
    "socket.gaierror: [Errno -3] Temporary failure in name resolution",
]


@pytest.mark.parametrize("words", SOCKET_WORDS)
@pytest.mark.parametrize("cause", ["model_requirement", "gated_model", "compiler"])
def test_a_specific_cause_beats_socket_words_printed_before_it(words, cause):
    lines = [words, *FRAMES, CAUSES[cause]]
    assert both_paths(lines).rule == _alone(CAUSES[cause])


def _under_lookup_wrapper(origin: list[str]) -> list[str]:
    """``origin`` raised, and vLLM 0.8's config lookup wrapper raised from it."""
    return [
        *FRAMES,
        *origin,
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        *FRAMES,
        "ValueError: Invalid repository ID or local directory specified: 'org/model'.",
    ]


@pytest.mark.parametrize("words", RAISED_SOCKET_WORDS)
def test_socket_words_raised_are_the_origin_a_lookup_wrapper_does_not_hide(words):
    diagnosis = both_paths(_under_lookup_wrapper([words]))
    assert (str(diagnosis.category), diagnosis.permanent) == ("network", False)


# The hub's 403 raised under that wrapper: the hub answers 401 or 404 for a repo that
# does not exist, 403 only for one this token may not read (gated, a fine-grained token
# without the gated-repositories permission): requests' words for a hub URL, or
# huggingface_hub's lines under its exception (held-out set NL).
HUB_403 = {
    "requests": [
        "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: "
        "https://huggingface.co/org/model/resolve/main/config.json"
    ],
    "huggingface_hub": [
        "huggingface_hub.errors.HfHubHTTPError: (Request ID: Root=1-67c81f05-4b8e2a7d)",
        "",
        "403 Forbidden: Please enable access to public gated repositories in your "
        "fine-grained token settings to view this repository..",
        "Cannot access content at: https://huggingface.co/org/model/resolve/main/config.json.",
        "Make sure your token has the correct permissions.",
    ],
}


@pytest.mark.parametrize("words", HUB_403.values(), ids=HUB_403.keys())
def test_the_hubs_403_raised_is_the_origin_a_lookup_wrapper_does_not_hide(words):
    diagnosis = both_paths(_under_lookup_wrapper(words))
    assert (str(diagnosis.category), diagnosis.permanent) == ("gated_model", True)


# torch's rendezvous store warning that one address could not be bound: it goes on to
# the next (IPv4 after IPv6) and raises only when none binds (held-out set NU).
RENDEZVOUS_BIND = (
    "(pid=18841, ip=172.16.8.11) [W socket.cpp:464] [c10d] The server socket has failed "
    "to bind to [::]:29500 (errno: 98 - Address already in use)."
)


@pytest.mark.parametrize("cause", ["model_requirement", "gated_model", "compiler"])
def test_a_specific_cause_beats_the_rendezvous_bind_warning_before_it(cause):
    lines = [RENDEZVOUS_BIND, *FRAMES, CAUSES[cause]]
    assert both_paths(lines).rule == _alone(CAUSES[cause])


def test_the_rendezvous_bind_warning_alone_is_the_port_in_use():
    alone = both_paths([RENDEZVOUS_BIND])
    assert (alone.rule, str(alone.category), alone.permanent) == (
        "rendezvous-bind-warning",
        "other",
        False,
    )
    bound = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000)"
    assert both_paths([RENDEZVOUS_BIND, bound]).rule == "port-in-use"


@pytest.mark.parametrize("words", SOCKET_WORDS + RAISED_SOCKET_WORDS)
def test_socket_words_alone_are_a_network_fault(words):
    diagnosis = both_paths([words])
    assert (str(diagnosis.category), diagnosis.permanent) == ("network", False)


def test_every_rule_has_a_kind_and_causes_share_a_rank():
    kinds = {rule.kind for rule in PACK.rules}
    assert kinds <= {"cause", "structure", "consequence", "shape"}
    causes = {r.rank for r in PACK.rules if r.kind == "cause" and r.category.permanent}
    assert len(causes - {r.rank for r in PACK.rules if str(r.category) in ("oom", "kv_cache")}) == 1


@pytest.mark.parametrize("wrapper", ["ray-task-error", "traceback-as-message"])
def test_a_wrapper_printed_before_the_exception_it_wraps_yields_to_it(wrapper):
    """Ray prints its wrapper first and the wrapped traceback after it (Ray Serve re-raises
    the replica's traceback.format_exc() as a RuntimeError's message): the wrapper is a
    consequence, so the exception that traceback ends in (here generic structure, judged
    by the catalogue) decides, though it comes later."""
    wrapped = (
        "ValueError: Please use Flashinfer backend for models withlogits_soft_cap (i.e., "
        "Gemma-2). Otherwise, the output might be wrong. Set Flashinfer backend by export "
        "VLLM_ATTENTION_BACKEND=FLASHINFER."
    )
    lines = [*CONSEQUENCES[wrapper], *FRAMES, wrapped]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("model_requirement", True)
    assert diagnosis.evidence is not None and "Flashinfer" in diagnosis.evidence.text


# A line vLLM logs at WARNING whose words a rule reads, and the engine's last step.
WARNED = (
    "{prefix}WARNING 03-18 10:02:34 ray_utils.py:315] The number of required GPUs exceeds "
    "the total number of available GPUs in the placement group."
)
ENGINE_DONE = (
    "{prefix}INFO 03-18 10:03:15 llm_engine.py:431] init engine (profile, create kv cache, "
    "warmup model) took 19.70 seconds"
)
SERVER = "INFO 03-18 10:02:10 api_server.py:177] vLLM API server version 0.7.2"


@pytest.mark.parametrize("prefix", ["", "(ServeReplica:default:LLM pid=30655) "])
@pytest.mark.parametrize(
    ("server", "state"), [([], State.READY), ([SERVER], State.LOADING)], ids=["offline", "server"]
)
def test_a_warning_the_engines_initialisation_outlived_is_forgotten(prefix, server, state):
    """Some of vLLM's warnings are fatal; one the engine's whole initialisation came
    after was not (an offline engine up is ready; a server's is still starting its API)."""
    lines = [*server, WARNED.format(prefix=prefix), ENGINE_DONE.format(prefix="")]
    assert both_paths(lines).state is state
    assert both_paths(lines[:-1]).rule == "tensor-parallel-gpu-count"


def test_an_error_or_another_services_warning_is_not_forgotten():
    """An ERROR line may be another engine's (data parallel), a warning another vLLM
    service's: the engine that finished says nothing of them."""
    error = WARNED.format(prefix="").replace("WARNING", "ERROR")
    assert both_paths([error, ENGINE_DONE.format(prefix="")]).rule == "tensor-parallel-gpu-count"
    services = [
        "vllm-a-1  | " + SERVER,
        "vllm-b-1  | " + SERVER,
        WARNED.format(prefix="vllm-a-1  | "),
        ENGINE_DONE.format(prefix="vllm-b-1  | "),
    ]
    assert both_paths(services).rule == "tensor-parallel-gpu-count"


PG_WAIT = (
    "INFO 11-27 18:22:55 ray_utils.py:270] Waiting for creating a placement group of specs "
    "for {seconds} seconds. specs=[{{'GPU': 1.0, 'node:192.168.40.21': 0.001}}, {{'GPU': 1.0}}]. "
    "Check `ray status` to see if you have enough resources."
)


@pytest.mark.parametrize(
    ("seconds", "after", "state"),
    [
        (10, [], State.STARTING),  # a cluster that provides the GPUs in seconds
        (70, [], State.STARTING),
        (150, [], State.FAILED_PERMANENT),  # stuck: the log ends in the wait
        (1270, ["^C"], State.FAILED_PERMANENT),  # the user stopped it
        (150, [ENGINE_DONE.format(prefix="")], State.LOADING),  # the GPUs came after all
        (
            310,
            ["RuntimeError: CUDA error: an illegal memory access was encountered"],
            State.FAILED_TRANSIENT,
        ),  # a cause printed after the wait decides
    ],
)
def test_a_start_stuck_on_a_placement_group(seconds, after, state):
    lines = [SERVER, PG_WAIT.format(seconds=seconds), *after]
    diagnosis = both_paths(lines)
    assert diagnosis.state is state
    if state is State.FAILED_PERMANENT:
        assert diagnosis.rule == "placement-group-never-ready"


ENGINE_TIMEOUT = (
    "(APIServer pid=1) TimeoutError: Timed out waiting for engine core processes to start. "
    "This is often caused by slow weight loading for large models. Waited 600s (configured "
    "by VLLM_ENGINE_READY_TIMEOUT_S)."
)
BAR = "model-00011-of-00014.safetensors:  33%|███▎      | 1.52G/4.62G [09:41<{eta}, {rate}]"
STALLED, MOVING = BAR.format(eta="???", rate="0.00B/s"), BAR.format(eta="29:05", rate="1.78MB/s")
CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.10 GiB of which 1.00 GiB is free."
)


@pytest.mark.parametrize(
    ("lines", "rule", "state"),
    [
        ([ENGINE_TIMEOUT], "engine-start-timed-out", State.FAILED_PERMANENT),
        ([MOVING, ENGINE_TIMEOUT], "engine-start-timed-out", State.FAILED_PERMANENT),
        ([STALLED, ENGINE_TIMEOUT], "hub-download-stalled", State.FAILED_TRANSIENT),
        ([STALLED], "hub-download-stalled", State.FAILED_TRANSIENT),
        ([STALLED, "INFO:     Application startup complete."], None, State.READY),
        ([CUDA_OOM, ENGINE_TIMEOUT], "cuda-oom-allocate", State.FAILED_PERMANENT),
        ([STALLED, CUDA_OOM], "cuda-oom-allocate", State.FAILED_PERMANENT),
    ],
    ids=[
        "timeout",
        "moving",
        "stalled-timeout",
        "stalled",
        "resumed",
        "oom-timeout",
        "stalled-oom",
    ],
)
def test_an_engine_timeout_names_what_made_the_start_slow(lines, rule, state):
    """vLLM's engine timeout is a consequence; a download that stalled before it is the
    network's; any cause printed decides."""
    diagnosis = both_paths([SERVER, *lines])
    assert (diagnosis.rule, diagnosis.state) == (rule, state)


RETRIED = (
    "(VllmWorker TP0 pid=346) WARNING 08-14 09:24:19 [file_download.py:719] Error while "
    "downloading from https://cdn-lfs-us-1.hf.co/repos/8c/model-00003-of-00030.safetensors: "
    "HTTPSConnectionPool(host='cdn-lfs-us-1.hf.co', port=443): Read timed out."
)
SHARD = "model-00004-of-00030.safetensors: 100%|██████████| 4.66G/4.66G [00:38<00:00, 121MB/s]"


def test_a_warnings_socket_words_the_start_went_on_after_are_forgotten():
    """huggingface_hub's notice of a download it retries, logged below ERROR, then the
    next shards downloading: the start went on (under way). Without progress after it,
    or raised, the same words are a network fault."""
    before = [SERVER, "model-00001-of-00030.safetensors: 100%|██████████| 4.58G/4.58G"]
    assert both_paths([*before, RETRIED, "Trying to resume download...", SHARD]).state is (
        State.DOWNLOADING
    )
    assert str(both_paths([*before, RETRIED]).category) == "network"
    raised = RETRIED.split("] ", 1)[1].replace("Error while", "OSError: Error while")
    assert both_paths([*before, raised, SHARD]).failed
    # the block scan keeps the progress markers relevant while such words stand: a big
    # log whose blocks between are skipped reads the same
    filler = [f"INFO 08-14 09:25:{n % 60:02d} [metrics.py:1] heartbeat {n}" for n in range(6000)]
    lines = [*before, RETRIED, *filler, SHARD]
    by_file = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK, block_size=4096)
    assert by_file.state is State.DOWNLOADING


def test_the_socket_words_then_the_same_files_bar_past_them_are_forgotten():
    """The socket's words printed without a level (huggingface_hub's own handler), then
    "Trying to resume download..." and the same file's bar going past where it stopped
    (held-out XS): the download went on, under way. Its redraw at the same percent, or
    nothing after it, is no progress: the network."""
    words = RETRIED.split("] ", 1)[1]
    bar = "consolidated.safetensors: {}%|█▋        | {}G/47.1G [01:33<07:58, 82.3MB/s]"
    before = [SERVER, bar.format(11, 5.22), bar.format(16, 7.72)]
    went_on = [*before, words, "Trying to resume download...", bar.format(16, 7.72)]
    assert str(both_paths(went_on).category) == "network"
    assert both_paths([*went_on, bar.format(19, 9.07)]).state is State.DOWNLOADING
    # downloading with no bar before them, a bar after says nothing of where it stopped
    fetching = [SERVER, "Fetching 3 files:   0%|          | 0/3 [00:00<?, ?it/s]", words]
    assert str(both_paths([*fetching, bar.format(19, 9.07)]).category) == "network"


def test_a_retried_request_then_the_last_bars_file_further_on_is_forgotten():
    """huggingface_hub's notice of a request it retries, printed without a level among
    shards downloading in parallel (held-out XW): the file whose bar was shown last
    going further is the download going on; another file's bar, shown at any percent,
    says nothing of the interrupted one."""
    shard = "model-0000{}-of-00017.safetensors: {}%|██        | 1.0G/3.9G [01:12<04:31, 11.3MB/s]"
    retried = (
        "'(ReadTimeoutError(\"HTTPSConnectionPool(host='cdn-lfs-us-1.hf.co', port=443): Read "
        "timed out. (read timeout=10)\"), '(Request ID: 0e7b)')' thrown while requesting GET "
        "https://cdn-lfs-us-1.hf.co/repos/8c/model-00002-of-00017.safetensors"
    )
    lines = [
        SERVER,
        shard.format(1, 34),
        shard.format(2, 27),
        retried,
        "Retrying in 1s [Retry 1/5].",
    ]
    assert str(both_paths([*lines, shard.format(1, 61)]).category) == "network"
    assert both_paths([*lines, shard.format(1, 61), shard.format(2, 49)]).state is (
        State.DOWNLOADING
    )
