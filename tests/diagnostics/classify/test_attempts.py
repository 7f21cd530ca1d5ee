"""Several attempts in one log (diagnostics.attempts.last): the last attempt's failure
decides when it names a cause of its own; a crash loop's last attempt cut short, a
failure before vLLM's first start and a worker echoing the server's banner do not
start a new verdict. Each through both paths (the line path and diagnose's file reader)."""

from __future__ import annotations

import io

import pytest

from diagnostics import classify_lines
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()
BANNER = "INFO 08-09 02:11:40 api_server.py:339] vLLM API server version 0.5.4"
NCCL = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
HEADS = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3)."
KV = (
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
    "that can be stored in KV cache (8480). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine."
)
LOADING = "INFO 08-09 02:19:05 model_runner.py:720] Loading model weights took 13.9 GB"


def verdict(lines: list[str]):
    by_lines = classify_lines(lines, PACK)
    by_file = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert by_file == by_lines
    return by_lines


def test_a_retry_with_other_settings_is_judged_by_its_own_failure():
    lines = [BANNER, "Traceback (most recent call last):", NCCL, BANNER, HEADS]
    diagnosis = verdict(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 5
    # one attempt: the device fault keeps the start transient, whatever follows it
    one = verdict([BANNER, "Traceback (most recent call last):", NCCL, HEADS])
    assert str(one.category) == "cuda_fault"


def test_a_crash_loops_last_attempt_cut_short_keeps_the_cause_seen():
    diagnosis = verdict([BANNER, KV, BANNER, LOADING])
    assert str(diagnosis.category) == "kv_cache" and diagnosis.evidence.line == 2
    # ... and a last attempt that ends in a consequence only (a process killed)
    killed = verdict([BANNER, KV, BANNER, LOADING, "Killed"])
    assert str(killed.category) == "kv_cache"


def test_a_failure_before_vllms_first_start_stands():
    """A download step before vLLM started (an init container's 403) is not an attempt of
    vLLM's: the failure vLLM then reports is its consequence."""
    lines = [
        "huggingface_hub.errors.GatedRepoError: 403 Client Error. Cannot access gated repo "
        "for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.",
        BANNER,
        "ValueError: Invalid repository ID or local directory specified: '/models/llama'.",
    ]
    assert str(verdict(lines).category) == "gated_model"


def test_a_worker_echoing_the_banner_is_not_a_new_attempt():
    echo = f"(RayWorkerWrapper pid=5280) ERROR 04-26 01:59:07 {BANNER}"
    diagnosis = verdict([BANNER, "Traceback (most recent call last):", NCCL, echo, HEADS])
    assert str(diagnosis.category) == "cuda_fault"
    # the API server's own prefix (V1) is a start
    v1 = f"(APIServer pid=1) {BANNER}"
    diagnosis = verdict([v1, "Traceback (most recent call last):", NCCL, v1, HEADS])
    assert str(diagnosis.category) == "bad_config"


OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a "
    "total capacity of 14.74 GiB of which 178.12 MiB is free."
)
DTYPE = (
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
    "Your Tesla T4 GPU has compute capability 7.5."
)
SSL = (
    "requests.exceptions.SSLError: HTTPSConnectionPool(host='huggingface.co', port=443): Max "
    "retries exceeded with url: /api/models/org/m (Caused by SSLError(SSLCertVerificationError("
    "1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate "
    "in certificate chain (_ssl.c:1007)')))"
)


def test_the_engines_memory_before_the_first_start_is_an_earlier_attempts():
    """The engine runs out of memory only once it loads, after vLLM announced its start:
    such a failure above the first start the log shows is an earlier attempt's whose start
    was not kept (a notebook's tail, a previous container's last lines; held-out RD), and
    the last attempt's own cause decides, as when both starts are shown."""
    for first in ([OOM], [KV]):
        retried = verdict([*first, "", BANNER, "Traceback (most recent call last):", DTYPE])
        assert (str(retried.category), retried.permanent) == ("model_requirement", True)
        assert retried.evidence is not None and retried.evidence.line == len(first) + 4
        network = verdict([*first, BANNER, "Traceback (most recent call last):", SSL])
        assert (str(network.category), network.permanent) == ("network", False)
        # a last attempt cut short keeps it, as any cause seen before
        assert str(verdict([*first, BANNER, LOADING]).category) in ("oom", "kv_cache")


START_LOAD = (
    "INFO 08-09 02:18:40 model_runner.py:1056] Starting to load model meta-llama/Llama-3.1-8B..."
)
BNB = (
    "ImportError: Please install bitsandbytes>=0.45.0 via `pip install bitsandbytes>=0.45.0` "
    "to use bitsandbytes quantizer."
)


def test_a_later_attempt_that_got_further_on_what_the_files_cannot_cause_ends_a_fetch_failure():
    """A fetch refused before vLLM's first start, then a start (the token fixed) that got
    further, to loading the model, and failed on what the model's files cannot cause (the
    image lacks a module, the engine's memory): that failure is the paste's verdict. Not
    when the later start got no further, nor when it failed on what missing files cause."""
    gated = (
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo "
        "for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json."
    )
    for cause, category in ((BNB, "other"), (KV, "kv_cache")):
        diagnosis = verdict(
            [gated, BANNER, START_LOAD, "Traceback (most recent call last):", cause]
        )
        assert (str(diagnosis.category), diagnosis.permanent) == (category, True)
        assert diagnosis.evidence is not None and diagnosis.evidence.line == 5
    # a start that got no further than the failure's phase: the fetch's failure stands (the
    # engine's memory is found only once the model loaded: it got further)
    bare = verdict([gated, BANNER, "Traceback (most recent call last):", BNB])
    assert str(bare.category) == "gated_model"
    # what a fetch left (weights missing) is its consequence
    missing = "ValueError: Invalid repository ID or local directory specified: '/models/llama'."
    assert str(verdict([gated, BANNER, START_LOAD, missing]).category) == "gated_model"


def test_an_import_time_failure_before_the_first_start_stands():
    """What vLLM prints before its start's first line (its imports, the platform's
    detection) is the start's own, not an earlier attempt's."""
    lines = [
        "WARNING 09-12 10:01:02 _custom_ops.py:19] Failed to import from vllm._C with "
        "ImportError('/usr/local/lib/python3.10/dist-packages/vllm/_C.abi3.so: undefined "
        "symbol: _ZN3c104cuda9SetDeviceEi')",
        BANNER,
        "Traceback (most recent call last):",
        "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'",
    ]
    diagnosis = verdict(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("other", True)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 1


def test_a_compose_services_restart_is_an_attempt():
    """docker compose prints every line of the service under its name, the restarts' too:
    vLLM's start under a service's name begins an attempt (only vLLM prints it; held-out
    RD: a first start out of KV cache memory, the restart ending in a device fault)."""
    svc = "vllm-llama-1  | "
    lines = [
        svc + KV,
        svc + BANNER,
        svc + "Traceback (most recent call last):",
        svc + "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    diagnosis = verdict(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("cuda_fault", False)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 4


def test_vllms_own_flags_or_the_models_code_before_the_first_start_are_an_earlier_attempts():
    """A flag vLLM rejected (its process ends as it parses them) or the model's code it
    could not load, above the first start the log shows, is a previous container's or a
    retry's (held-out RJ: kubectl logs --previous beside the current logs); a download
    step's failure there still stands (test_a_failure_before_vllms_first_start_stands)."""
    remote = (
        "ValueError: The repository for openbmb/MiniCPM-V-2_6 contains custom code which must "
        "be executed to correctly load the model. Please pass the argument "
        "`trust_remote_code=True` to allow custom code to be run."
    )
    flag = "api_server.py: error: unrecognized arguments: --gpu-memory-utilisation 0.9"
    for first in (remote, flag):
        diagnosis = verdict([first, "", BANNER, "Traceback (most recent call last):", SSL])
        assert (str(diagnosis.category), diagnosis.permanent) == ("network", False), first


def test_a_last_attempt_ending_in_a_bare_exception_keeps_the_cause_seen():
    """A last attempt whose failure names no cause (the last resort: a bare exception, a
    test harness's "Server exited unexpectedly" once the start it waited for failed;
    held-out RP) keeps the earlier attempt's cause, as a last attempt cut short does."""
    lines = [
        BANNER,
        KV,
        BANNER,
        "Traceback (most recent call last):",
        "E                   RuntimeError: Server exited unexpectedly.",
    ]
    diagnosis = verdict(lines)
    assert str(diagnosis.category) == "kv_cache" and diagnosis.evidence.line == 2
    # a cause of its own, though generic (the port held by another process), decides
    held = verdict([BANNER, KV, BANNER, "OSError: [Errno 98] Address already in use"])
    assert (str(held.category), held.permanent) == ("other", False)


@pytest.mark.parametrize(
    ("step", "category"),
    [
        (
            [
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.10/dist-packages/awq/quantize/quantizer.py", line 251, in _module_forward',
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a "
                "total capacity of 79.15 GiB of which 2.77 GiB is free. Including non-PyTorch "
                "memory, this process has 76.37 GiB memory in use.",
            ],
            "oom",
        ),
        (["ModuleNotFoundError: No module named 'llmcompressor'"], "other"),
    ],
)
def test_a_folder_a_failed_step_was_to_fill_is_what_it_left(step, category):
    """A quantization, a conversion or a merge before vLLM's first start failed; vLLM
    then found no model in the folder it was to write: the step's failure is the
    verdict. A repository the hub lacks, or a platform's status above the start (the
    crash loop vLLM's own failure made), is not a step's."""
    missing = "ValueError: No supported config format found in /models/llama-3-70b-awq"
    lines = ["step 2/3: quantize", *step, "step 3/3: serve", BANNER, missing]
    assert str(verdict(lines).category) == category
    hub = "OSError: org/nope is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'"
    assert str(verdict([*step, BANNER, hub]).category) == "model_not_found"
    status = ["NAME  READY  STATUS  RESTARTS", "vllm-0  0/1  CrashLoopBackOff  4 (31s ago)"]
    assert str(verdict([*status, BANNER, missing]).category) == "model_not_found"


# What a download step prints when it loses its connection partway, in each tool's words
FETCH_FAILED = [
    "download failed: s3://models/qwen/model-00011-of-00017.safetensors to "
    "models/qwen/model-00011-of-00017.safetensors Connection was closed before we received "
    "a valid response from endpoint URL",
    "2025/03/02 10:41:07 ERROR : model-00003-of-00004.safetensors: Failed to copy: read tcp "
    "10.0.3.7:51234->52.92.1.10:443: read: connection reset by peer",
    "curl: (56) Recv failure: Connection reset by peer",
    "error: RPC failed; curl 92 HTTP/2 stream 5 was not closed cleanly: CANCEL (err 8)",
    "wget: unable to resolve host address 'huggingface.co'",
    'Error: max retries exceeded: Get "https://registry.ollama.ai/v2/library/qwen2/blobs/'
    'sha256:66b9": unexpected EOF',
]
# What vLLM then reports of the files the step left (rules marked of_the_files)
LEFT_IN_THE_FILES = [
    "ValueError: Following weights were not initialized from checkpoint: "
    "{'model.layers.41.self_attn.qkv_proj.weight'}",
    "RuntimeError: Cannot find any model weights with `/models/qwen`",
    "OSError: It looks like the config file at '/models/qwen/config.json' is not a valid "
    "JSON file.",
    # (after a git clone of the repository: the pointer files git-lfs left)
    "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
]


@pytest.mark.parametrize("left", LEFT_IN_THE_FILES)
@pytest.mark.parametrize("fetch", FETCH_FAILED)
def test_weights_a_failed_download_step_left_are_its_failure(fetch, left):
    """A step above vLLM's first start lost its connection partway (each tool's words);
    vLLM then found the checkpoint incomplete: the network is the cause, transient. The
    same vLLM failure with no step failing above stands."""
    clone = "+ git clone https://huggingface.co/Qwen/Qwen2-7B /models/qwen"
    lines = [clone, fetch, "+ exec vllm serve /models/qwen", BANNER, LOADING, left]
    diagnosis = verdict(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("network", False)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 2
    alone = verdict([clone, "+ exec vllm serve /models/qwen", BANNER, LOADING, left])
    assert alone.permanent is True and str(alone.category) != "network"


# A start script's install above vLLM's start that could not fetch its package (pip
# through git: the host unresolved), then what vLLM misses of it (rules marked
# of_the_packages; held-out WT, stop 54: a newer transformers for Qwen2.5-VL)
INSTALL = [
    '+ pip install "git+https://github.com/huggingface/transformers@336dc69"',
    "  fatal: unable to access 'https://github.com/huggingface/transformers/': Could not "
    "resolve host: github.com",
    "  error: subprocess-exited-with-error",
    "+ exec vllm serve Qwen/Qwen2.5-VL-7B-Instruct",
]
LEFT_OUT_OF_THE_IMAGE = [
    "ValueError: The checkpoint you are trying to load has model type `qwen2_5_vl` but "
    "Transformers does not recognize this architecture. This could be because of an issue "
    "with the checkpoint, or because your version of Transformers is out of date.",
    "ModuleNotFoundError: No module named 'qwen_vl_utils'",
]


@pytest.mark.parametrize("left", LEFT_OUT_OF_THE_IMAGE)
def test_what_a_failed_install_step_left_out_of_the_image_is_its_failure(left):
    """The install's network is the cause, transient; the same failure with no step
    failing above stands: the image lacks it."""
    diagnosis = verdict([*INSTALL, BANNER, left])
    assert (str(diagnosis.category), diagnosis.permanent) == ("network", False)
    assert diagnosis.evidence is not None and diagnosis.evidence.line == 2
    alone = verdict([INSTALL[-1], BANNER, left])
    assert alone.permanent is True and str(alone.category) != "network"


def test_weights_missing_after_an_earlier_attempts_own_failure_stand():
    """What only a vLLM process fails on (its KV cache: an earlier attempt's, whose start
    the paste cut) left no files out: the checkpoint's failure stands."""
    left = LEFT_IN_THE_FILES[0]
    earlier = verdict(["Traceback (most recent call last):", KV, BANNER, LOADING, left])
    assert (str(earlier.category), earlier.evidence.line) == ("model_requirement", 5)


BF16 = (
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
    "Your Tesla V100-SXM2-32GB GPU has compute capability 7.0."
)


@pytest.mark.parametrize(
    "fault",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: device-side assert triggered",
        NCCL,
    ],
)
def test_a_fault_only_a_running_engine_prints_is_an_earlier_attempts(fault):
    """A kernel's or a communicator's fault above the first start a paste shows (a thread's
    earlier try, quoted without its start lines) is an earlier attempt's: the last
    attempt's own failure decides. A device fault at import (no GPU found) may come
    before any start, and stands."""
    diagnosis = verdict(["first try:", fault, "then:", BANNER, BF16])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("model_requirement", 5)
    at_import = "RuntimeError: No CUDA GPUs are available"
    assert str(verdict(["first try:", at_import, "then:", BANNER, BF16]).category) == "cuda_fault"


def test_the_hub_answering_a_later_attempt_ends_an_earlier_network_failure():
    """A network failure above the first start (a forum post's first try), then a start
    the hub answers with a refusal: the network was back, the refusal decides. A local
    folder vLLM then finds empty is what a failed download left (the network stands)."""
    timeout = (
        'requests.exceptions.ConnectTimeout: (MaxRetryError("HTTPSConnectionPool('
        "host='huggingface.co', port=443): Max retries exceeded with url: /org/m/resolve/"
        'main/config.json (Caused by ConnectTimeoutError(...))"))'
    )
    gated = (
        "OSError: You are trying to access a gated repo. Make sure to have access to it at "
        "https://huggingface.co/org/m."
    )
    diagnosis = verdict(["first try:", timeout, "after the proxy fix:", BANNER, gated])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("gated_model", 5)
    for empty in (
        "ValueError: No supported config format found in /models/m",
        "ValueError: No supported config format found in models/m",
        "RuntimeError: Cannot find any model weights with `org/m`",
    ):
        assert str(verdict(["first try:", timeout, BANNER, empty]).category) == "network"


def test_a_failure_a_person_quotes_above_the_log_is_an_earlier_runs():
    """An exception named in backticks in a sentence above the log (held-out WW, stop 54:
    the hub's refusal that made the user copy the model over, then the log of the run
    offline) is an earlier run's: the pasted run's own cause decides. The same words
    alone, with no run after them, are the report."""
    told = (
        "Because of `GatedRepoError: 401 Client Error. Cannot access gated repo for url "
        "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json` in the "
        "cluster, I copied the cache over and run with HF_HUB_OFFLINE=1. Still fails:"
    )
    offline = (
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, "
        "couldn't find it in the cached files and it looks like meta-llama/Llama-3.1-8B "
        "is not the path to a directory containing a file named config.json."
    )
    diagnosis = verdict([told, "", BANNER, "HF_HUB_OFFLINE=1", offline])
    assert (str(diagnosis.category), diagnosis.permanent) == ("network", False)
    assert str(verdict([told]).category) == "gated_model"


def test_a_message_only_vllm_prints_above_the_first_start_is_an_earlier_attempts():
    """vLLM's own message (catalogued from vLLM's sources) above the first start a log
    shows is no step's (held-out WW: "On 0.3.3 I was getting <the registry's ValueError>,
    so I upgraded. Now it's something else:"): the attempt below decides. A message a
    step prints too (the hub's, transformers') keeps standing as the step's failure."""
    earlier = (
        "ValueError: Model architectures ['InternLM2ForCausalLM'] are not supported for now. "
        "Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']"
    )
    lines = ["On 0.3.3 I was getting", "", earlier, "", "Now it's something else:", BANNER]
    diagnosis = verdict([*lines, "Traceback (most recent call last):", HEADS])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("bad_config", 8)
    # the same shape with the hub's refusal above: the step's failure stands
    refused = (
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo "
        "for url https://huggingface.co/org/m/resolve/main/config.json."
    )
    lines[2] = refused
    diagnosis = verdict([*lines, "Traceback (most recent call last):", HEADS])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("gated_model", 3)


def test_what_vllm_printed_above_the_first_start_left_no_folder_empty():
    """A memory failure above the first start a log shows, under vLLM's logger header
    (held-out XV: the first try's out-of-memory, then a run whose mounted folder is not
    there), is an earlier attempt's: the folder's absence is the verdict. The same
    failure printed by a conversion step (AutoAWQ's calibration, no vLLM header) left
    the folder empty: the step's."""
    oom = (
        "CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of "
        "47.41 GiB of which 1.52 GiB is free."
    )
    missing = (
        "ValueError: Invalid repository ID or local directory specified: "
        "'/models/Llama-3.3-70B-AWQ'."
    )
    tail = [BANNER, "Traceback (most recent call last):", missing]
    loaded = "INFO 03-11 08:20:44 model_runner.py:1115] Loading model weights took 37.16 GB"
    logged = f"ERROR 03-11 08:20:51 engine.py:400] {oom}"
    diagnosis = verdict(["first try died like this:", loaded, logged, "now:", *tail])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("model_not_found", 7)
    diagnosis = verdict(["$ python quantize.py", f"torch.OutOfMemoryError: {oom}", *tail])
    assert (str(diagnosis.category), diagnosis.evidence.line) == ("oom", 2)


def test_vllm_loading_the_model_after_a_device_fault_above_its_start_got_past_it():
    """A job script's device check above vLLM's start ("nvidia-smi: command not found":
    the driver's tools are not on its PATH), then vLLM loading the model onto the GPU:
    vLLM found the device, the start is under way (held-out ACJ, stop 58). Before the
    load (vLLM not yet on the device), and when the start then fails on a consequence
    only, the fault stands."""
    smi = "/var/spool/slurmd/job4812345/slurm_script: line 19: nvidia-smi: command not found"
    shards = "Loading safetensors checkpoint shards:  57% Completed | 17/30 [02:45<02:06, 9.76s/it]"
    assert str(verdict([smi, BANNER, shards]).state) == "loading"
    assert str(verdict([smi, BANNER]).category) == "cuda_fault"
    killed = verdict([smi, BANNER, shards, "Killed"])
    assert killed.failed


def test_a_weights_download_inside_loading_still_counts_as_past_the_device():
    """V1 downloads the weights inside loading, after the device is set up: a wait-for-GPU
    loop's NVML errors above vLLM's start, then "Starting to load model" and the weights'
    download bars, the paste ending there, is under way (held-out ADM, stop 59). A
    download before loading (the config's, vLLM not yet on the device) leaves the fault
    standing."""
    nvml = "[entrypoint] try 1/20: nvidia-smi not ready: Failed to initialize NVML: Unknown Error"
    load = (
        "INFO 05-14 07:41:54 [gpu_model_runner.py:1329] Starting to load model "
        "meta-llama/Llama-3.1-8B-Instruct..."
    )
    bar = "model-00001-of-00004.safetensors:  21%|##        | 1.05G/4.98G [00:14<00:51, 76.2MB/s]"
    assert str(verdict([nvml, BANNER, load, bar]).state) == "downloading"
    assert str(verdict([nvml, BANNER, bar]).category) == "cuda_fault"
