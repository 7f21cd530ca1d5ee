"""Category boundaries as principles (docs/diagnostics.md, "Category boundaries"), each
tested with built wordings: lines written for the test in the shapes the sources raise,
not copies of corpus lines."""

from __future__ import annotations

import pytest

from diagnostics import classify_lines
from diagnostics.model import State

TB = [
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/engine/llm_engine.py", line 9, in x',
]
MODEL_CODE = '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/models/llama.py", line 210, in __init__'


def verdict(*lines: str):
    return classify_lines([*TB, *lines])


# 1. A value the user chose that vLLM rejects is bad_config, even deep in model code.
CHOSEN_VALUE = [
    "ValueError: rope_type='yarnish' is not supported for LlamaAttention; expected one of "
    "['linear', 'dynamic', 'yarn']",
    "ValueError: kv_cache_dtype='fp4' must be one of ['auto', 'fp8', 'fp8_e5m2']",
    "ValueError: load_format 'pt' is not supported by the gguf quantization.",
    "NotImplementedError: Unknown load format: tensorizerx",
    "ValueError: Unsupported attention backend FLASHY; valid values are FLASH_ATTN, XFORMERS",
    # the dtype chosen for a quantization method (catalogued: assign.yaml)
    "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported "
    "dtypes: [torch.float16]",
    "ValueError: BitsAndBytes quantization and QLoRA adapter only support 'bitsandbytes' "
    "load format, but got auto",
    # a chosen value named with what it cannot be combined with
    "ValueError: kv_cache_dtype fp8_e5m2 cannot be combined with the scales stored in this "
    "checkpoint.",
    "ValueError: attention_backend=FLASHINFER is incompatible with sliding window models.",
    # a KV-cache dtype named by its value
    "ValueError: fp8_e5m2 kv-cache is not supported with fp8 checkpoints.",
    "ValueError: nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) "
    "backends. Please use a different --kv-cache-dtype (e.g., 'fp8' or 'auto').",
    # vLLM 0.8-0.11 refuse a V1 feature only when the user set VLLM_USE_V1=1 (unset, it
    # falls back to V0): whatever the feature, the value set is what is rejected
    "NotImplementedError: VLLM_USE_V1=1 is not supported with Speculative Decoding with "
    "draft model.",
    "NotImplementedError: VLLM_USE_V1=1 is not supported with --preemption-mode.",
    "NotImplementedError: VLLM_USE_V1=1 is not supported with Compute Capability < 8.0.",
    # a file an option names that is not there or not usable: the path or file chosen
    "ValueError: The supplied chat template (/templates/x.jinja) looks like a file path, "
    "but it failed to be opened. Reason: [Errno 2] No such file or directory",
    "FileNotFoundError: [Errno 2] No such file or directory: '/templates/tools.jinja'",
    "FileNotFoundError: [Errno 2] No such file or directory: '/certs/server.pem'",
    "ssl.SSLError: [SSL] PEM lib (_ssl.c:3900)",
    "ssl.SSLError: [SSL: KEY_VALUES_MISMATCH] key values mismatch (_ssl.c:3926)",
    # a value named as invalid with the accepted ones (a parser, a backend: any name)
    "KeyError: 'invalid tool call parser: qwen_custom (chose from { hermes,llama3_json,mistral })'",
    "ValueError: Invalid reasoning parser: r2 (choose from deepseek_r1, qwen3)",
    "ValueError: Invalid guided decoding backend: 'lmfe'. Valid backends are: outlines, xgrammar",
    # a feature vLLM offers through one engine, chosen with another (catalogued)
    "NotImplementedError: Pipeline parallelism is only supported through AsyncLLMEngine as "
    "performance will be severely degraded otherwise.",
    # two options chosen together that vLLM does not support together
    "ValueError: BitsAndBytes quantization with TP or PP is not supported yet.",
    "ValueError: BitsAndBytes with enforce_eager = False is not supported yet.",
    "ValueError: Prequant BitsAndBytes models with TP is not supported.Please try with PP.",
    "NotImplementedError: GPTQ with pipeline parallelism is not supported yet.",
    # the KV cache's block size, the user's --block-size, as an attention backend checks it
    "ValueError: Block size must be a multiple of 16.",
    # a limit whose message says which option to turn off
    "ValueError: Full CUDAGraph not supported for FlashInferBackend. Turn off "
    "CompilationConfig.full_cuda_graph or use a different attention backend.",
]


@pytest.mark.parametrize("line", CHOSEN_VALUE)
@pytest.mark.parametrize("deep", [False, True], ids=["engine", "model-code"])
def test_a_chosen_value_vllm_rejects_is_bad_config(line, deep):
    diagnosis = verdict(*([MODEL_CODE] if deep else []), line)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)


# 2. CUDA out of memory in every wording is oom; any other CUDA/HIP error is cuda_fault.
OUT_OF_MEMORY = [
    # other accelerators' runtimes: XLA on a TPU, Habana's device memory on a Gaudi
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for "
    "size::2147483648 (2048)MB",
    "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
    "Ran out of memory in memory space hbm. Used 17.21G of 15.48G hbm.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a "
    "total capacity of 23.60 GiB of which 100.00 MiB is free.",
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "RuntimeError: HIP out of memory. Tried to allocate 1.00 GiB",
    "Cuda failure 2 'out of memory'",
    "RuntimeError: hipErrorOutOfMemory",
]
OTHER_CUDA = [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: CUDA error: device-side assert triggered",
    "Cuda error: misaligned address",
    "  what():  CUDA error: unspecified launch failure",
    "RuntimeError: HIP error: invalid device function",
    "RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`",
    "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
    # the other vendors' collective libraries (Ascend's HCCL)
    "RuntimeError: create:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2210 HCCL function "
    "error: HcclGetRootInfo(&hcclID), error code is 7",
    # ROCm's math libraries and its kernel driver's page-fault report
    "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such "
    "file or directory for GPU arch : gfx1036",
    "Memory access fault by GPU node-2 (Agent handle: 0x55d0c0) on address 0x7f1b00000. "
    "Reason: Page not present or supervisor privilege.",
]


@pytest.mark.parametrize("line", OUT_OF_MEMORY)
@pytest.mark.parametrize("where", ["load", "repacking", "graph-capture"])
def test_out_of_memory_in_every_wording_is_oom(line, where):
    before = {
        "load": [],
        "repacking": [
            '  File "/x/vllm/model_executor/layers/quantization/gptq_marlin.py", '
            "line 300, in process_weights_after_loading"
        ],
        "graph-capture": ["INFO 01-01 00:00:00 [gpu_model_runner.py:1] Capturing CUDA graphs"],
    }[where]
    assert str(verdict(*before, line).category) == "oom"


@pytest.mark.parametrize("line", OTHER_CUDA)
@pytest.mark.parametrize("traceback", [True, False], ids=["python", "c++-alone"])
def test_any_other_cuda_error_is_a_transient_fault(line, traceback):
    diagnosis = verdict(line) if traceback else classify_lines([line])
    assert (str(diagnosis.category), diagnosis.state) == ("cuda_fault", State.FAILED_TRANSIENT)


# 3. Permanence follows the image: what a restart on the same image cannot change.
IMAGE = [
    # transformers' checks of an optional backend, in their own lines
    "You need to have sentencepiece installed to convert a slow tokenizer to a fast one.",
    "ImportError: LlamaTokenizer requires the SentencePiece library but it was not found in "
    "your environment. Checkout the instructions on the installation page of its repo",
    "ModuleNotFoundError: No module named 'flash_attn'",
    # an extension built for another torch than the image's (torchvision's operators)
    "RuntimeError: operator torchvision::nms does not exist",
    # ... and as torch's lookup of an op by name says it (held-out set OQ)
    "RuntimeError: No such operator _C_cache_ops::reshape_and_cache",
    # the image's ptxas older than the GPU (a DGX Spark's sm_121a) or than the PTX
    "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'",
    "ptxas fatal   : Unsupported .version 8.7; current version is '8.4'",
    "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
    "ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
    "_ZN3c104cuda9SetDeviceEi",
    "ImportError: /lib64/libc.so.6: version `GLIBC_2.34' not found (required by x.so)",
    "RuntimeError: The detected CUDA version (12.8) mismatches the version that was used to "
    "compile PyTorch (11.8). Please make sure to use the same CUDA versions.",
    "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
    "RuntimeError: Ninja is required to load C++ extensions",
    "torch._inductor.exc.InvalidCxxCompiler: No working C++ compiler found in "
    "torch._inductor.config.cpp.cxx: (None, 'g++')",
    "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc'",
    "ImportError: Please install vllm[fastsafetensors] for fastsafetensors support.",
    "ValueError: This tokenizer cannot be instantiated. Please make sure you have "
    "`sentencepiece` installed in order to use this tokenizer.",
    "ValueError: Fast download using 'hf_transfer' is enabled (HF_HUB_ENABLE_HF_TRANSFER=1) "
    "but 'hf_transfer' package is not available in your environment. Try `pip install "
    "hf_transfer`.",
    "RuntimeError: ECCPUConnector requires NIXL; install the `nixl` package or set a different "
    "ec_connector.",
    # a kernel built at start-up that the image cannot build or link
    "RuntimeError: Error building extension 'fused_moe'",
    "/usr/bin/ld: cannot find -lcuda: No such file or directory",
    "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpx/main.c', '-O3', "
    "'-shared', '-o', '/tmp/tmpx/cuda_utils.so', '-lcuda']' returned non-zero exit status 1.",
    # a folder that must be written, on a read-only mount or not the container user's
    "PermissionError: [Errno 13] Permission denied: '/root/.cache/huggingface/hub'",
    "OSError: [Errno 30] Read-only file system: '/runpod-volume/huggingface-cache/hub'",
    # xFormers' kernels built for another torch: its reason for each one it could not use
    "    xFormers wasn't build with CUDA support",
    # vLLM's compiled ops missing (its extension built for another torch or platform)
    "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'",
    # the NCCL library the image ships, as vLLM's pynccl loads it
    "ERROR 05-16 20:31:24 pynccl.py:44] Failed to load NCCL library from "
    "/root/.config/vllm/nccl/cu12/libnccl.so.2.18.1 .It is expected if you are not running "
    "on NVIDIA/AMD GPUs.",
    # an interpreter older than the annotations vLLM's modules use (raised as they are
    # imported, under vllm/config: not a configuration check)
    "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
    "TypeError: 'type' object is not subscriptable",
    # a process joining a Ray cluster started with another Ray or Python
    "RuntimeError: Version mismatch: The cluster was started with:",
]
HOST = [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_fault"),
    (
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /api/models/x/y",
        "network",
    ),
    # a process killed with no cause printed: the shell's words, the exit code -9 or 137
    ("Killed", "other"),
    ("Container exited with status 137", "other"),
    ("RuntimeError: No HIP GPUs are available", "cuda_fault"),
    # NCCL's allocation of a few bytes while it sets up, before vLLM holds any memory: the
    # GPU's or its driver's state, not the configuration's out of memory
    ("misc/utils.cc:30 NCCL WARN Failed to CUDA calloc async 608 bytes", "cuda_fault"),
    # the driver's libraries are the host's, mounted by the container runtime
    (
        "OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
        "cuda_fault",
    ),
    (
        "ImportError: libnvidia-ptxjitcompiler.so.1: cannot open shared object file: No such "
        "file or directory",
        "cuda_fault",
    ),
    (
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
        "cuda_fault",
    ),
    ("Failed to CUDA calloc 24 bytes", "cuda_fault"),
    (
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore_0': -9}",
        "other",
    ),
    (
        'docker: Error response from daemon: could not select device driver "" with '
        "capabilities: [[gpu]].",
        "cuda_fault",
    ),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded", "cuda_fault"),
    # CDI (podman, containerd, docker 25+): the host has no spec for the GPU device asked
    ("Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all", "cuda_fault"),
    (
        "Error: failed to create task: failed to inject CDI devices: unresolvable CDI "
        "devices nvidia.com/gpu=0: unknown",
        "cuda_fault",
    ),
    (
        "urllib3.exceptions.NameResolutionError: <urllib3.connection.HTTPSConnection object "
        "at 0x7f>: Failed to resolve 'huggingface.co'",
        "network",
    ),
    ("curl: (6) Could not resolve host: huggingface.co", "network"),
    # a download that failed, raised without a status: the network (another minute)
    (
        "openai_harmony.HarmonyError: error downloading or loading vocab file: failed to "
        "download or load vocab file",
        "network",
    ),
    ("RuntimeError: Failed to download the model files from s3://bucket/model", "network"),
    # the driver's libraries are the host's (mounted by the container runtime)
    (
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
        "cuda_fault",
    ),
    ("OSError: [Errno 122] Disk quota exceeded: '/workspace/hub/x.incomplete'", "other"),
    # the GPUs' group never formed: a peer that did not join the rendezvous in time
    (
        "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. "
        "1/2 clients joined.",
        "cuda_fault",
    ),
    (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from "
        "[0] via c10d key-value store by key 0, but store->get(0) got error: Socket Timeout",
        "cuda_fault",
    ),
    # other accelerators' runtimes (a Gaudi whose devices another job holds)
    ("RuntimeError: synStatus=8 [Device not found] Device acquire failed.", "cuda_fault"),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 80.00 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
        "this process has 4.00 GiB memory in use.",
        "oom",
    ),
    # nothing left free at all: torch counts it in bytes
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
        "total capacity of 23.99 GiB of which 0 bytes is free. Process 48211 has 8.92 GiB "
        "memory in use. Including non-PyTorch memory, this process has 14.63 GiB memory in use.",
        "oom",
    ),
]


@pytest.mark.parametrize("line", IMAGE)
@pytest.mark.parametrize("deep", [False, True], ids=["engine", "model-code"])
def test_what_the_image_lacks_is_permanent(line, deep):
    """Also when raised through a model's code: the wording names what the image lacks,
    before the model-code family reads the line."""
    diagnosis = verdict(*([MODEL_CODE, line] if deep else [line]))
    assert diagnosis.fix and diagnosis.state is State.FAILED_PERMANENT, diagnosis
    assert str(diagnosis.category) == "other", diagnosis


# The start's own program missing from the image, in the words of the shell, Python and
# the container runtime: printed alone, no traceback, often the log's only line.
START_PROGRAM = [
    "/bin/sh: 1: vllm: not found",
    "bash: vllm: command not found",
    "bash: line 1: python3: command not found",
    "/usr/bin/python3: No module named vllm",
    "python3: can't open file '/app/serve.py': [Errno 2] No such file or directory",
    "docker: Error response from daemon: failed to create task for container: OCI runtime "
    'create failed: runc create failed: unable to start container process: exec: "vllm": '
    "executable file not found in $PATH: unknown.",
    "exec /usr/local/bin/start.sh: exec format error",
    # a start script saved with Windows line ends: its interpreter line names "bash\r"
    "/usr/bin/env: 'bash\\r': No such file or directory",
    "/bin/sh: /opt/start.sh: /bin/bash^M: bad interpreter: No such file or directory",
]


LOG_LINE = "INFO 05-01 10:00:00 Downloading the model"


@pytest.mark.parametrize(
    "lines", [[line] for line in START_PROGRAM] + [[LOG_LINE, line] for line in START_PROGRAM]
)
def test_a_start_program_missing_from_the_image_is_permanent(lines):
    """Alone, and after a line of the start."""
    diagnosis = classify_lines(lines)
    assert (diagnosis.state, diagnosis.rule) == (State.FAILED_PERMANENT, "broken-environment")


@pytest.mark.parametrize(("line", "category"), HOST)
def test_what_another_host_or_minute_can_change_is_transient(line, category):
    # a runner's report of the end stands alone; the others end a traceback
    alone = line in ("Killed", "Container exited with status 137")
    diagnosis = classify_lines([line]) if alone else verdict(line)
    assert (str(diagnosis.category), diagnosis.state) == (category, State.FAILED_TRANSIENT)


# 4. A hub HTTP status is judged by its code, in any wording.
URL = "https://huggingface.co/org/model/resolve/main/config.json"
STATUS = [
    (
        f"requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: {URL}",
        "gated_model",
    ),
    ("huggingface_hub.errors.HfHubHTTPError: 401 Client Error", "gated_model"),
    ("urllib.error.HTTPError: HTTP Error 403: Forbidden", "gated_model"),
    ("OSError: 403 Forbidden", "gated_model"),
    (
        f"requests.exceptions.HTTPError: 404 Client Error: Not Found for url: {URL}",
        "model_not_found",
    ),
    ("huggingface_hub.errors.HfHubHTTPError: 404 Client Error", "model_not_found"),
    ("OSError: Failed to download config.json: 404 Client Error: Not Found", "model_not_found"),
    (
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found "
        f"for url: {URL}",
        "model_not_found",
    ),
    ("huggingface_hub.errors.HfHubHTTPError: 429 Too Many Requests", "network"),
    (
        f"requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: {URL}",
        "network",
    ),
    ("urllib.error.HTTPError: HTTP Error 502: Bad Gateway", "network"),
    (
        f"requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: {URL}",
        "network",
    ),
    # A folder named as a model that does not exist locally: tried as a repo id.
    (
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/models/llama-3-8b'. Use `repo_type` argument if needed.",
        "model_not_found",
    ),
]


LOOKUP = "ValueError: No supported config format found in google/gemma-2-9b-it."
# where a log shows the hub switched off: a unit file, kubectl describe, a shell
OFFLINE = {
    "unit": "ExecStart=/usr/bin/env HF_HUB_OFFLINE=1 /opt/venv/bin/vllm serve org/model",
    "describe": "  HF_HUB_OFFLINE:  1",
    "shell": "export TRANSFORMERS_OFFLINE=1",
}


@pytest.mark.parametrize("offline", OFFLINE.values(), ids=OFFLINE.keys())
def test_a_lookup_that_failed_with_the_hub_switched_off_is_an_offline_cache_miss(offline):
    """vLLM's lookup conclusion alone is a repo the hub does not show (model_not_found);
    after the log showed the hub switched off, it is a cache miss (network, transient)."""
    alone = classify_lines([*TB, LOOKUP])
    assert (str(alone.category), alone.state) == ("model_not_found", State.FAILED_PERMANENT)
    diagnosis = classify_lines([offline, *TB, LOOKUP])
    assert (str(diagnosis.category), diagnosis.state) == ("network", State.FAILED_TRANSIENT)
    assert "google/gemma-2-9b-it " in diagnosis.cause
    # a local folder that is not there is not a cache miss, offline or not
    local = "ValueError: No supported config format found in /models/gemma-2-9b-it."
    diagnosis = classify_lines([offline, *TB, local])
    assert diagnosis.state is State.FAILED_PERMANENT
    # the weights' lookup too: no weight files for a hub id, offline, is a cache miss
    weights = "RuntimeError: Cannot find any model weights with `mistralai/Ministral-8B`"
    diagnosis = classify_lines([offline, *TB, weights])
    assert (str(diagnosis.category), diagnosis.state) == ("network", State.FAILED_TRANSIENT)
    folder = "RuntimeError: Cannot find any model weights with `/models/ministral-8b`"
    assert classify_lines([offline, *TB, folder]).state is State.FAILED_PERMANENT
    # vLLM 0.8+'s wording names no model: offline, the cache is the likelier miss
    unnamed = (
        "ValueError: Could not detect config format for no config file found. Ensure your "
        "model has either config.json (HF format) or params.json (Mistral format)."
    )
    diagnosis = classify_lines([offline, *TB, unnamed])
    assert (str(diagnosis.category), diagnosis.state) == ("network", State.FAILED_TRANSIENT)
    alone = classify_lines([*TB, unnamed])
    assert (str(alone.category), alone.state) == ("model_not_found", State.FAILED_PERMANENT)
    # transformers' own conclusions for a hub id's tokenizer and config
    for line in (
        "OSError: Can't load tokenizer for 'meta-llama/Llama-3.1-8B-Instruct'. If you were "
        "trying to load it from 'https://huggingface.co/models', make sure you don't have a "
        "local directory with the same name.",
        "OSError: Can't load the configuration of 'Qwen/Qwen2.5-7B-Instruct'. If you were "
        "trying to load it from 'https://huggingface.co/models', make sure you don't have a "
        "local directory with the same name.",
    ):
        diagnosis = classify_lines([offline, *TB, line])
        assert (str(diagnosis.category), diagnosis.state) == ("network", State.FAILED_TRANSIENT)
        assert classify_lines([*TB, line]).state is State.FAILED_PERMANENT


@pytest.mark.parametrize(("line", "category"), STATUS)
def test_a_hub_status_is_judged_by_its_code(line, category):
    diagnosis = verdict(line)
    assert str(diagnosis.category) == category
    assert diagnosis.permanent is (category != "network")


# huggingface_hub's "Repository Not Found for url" with each URL its versions print: the
# answer names the repo the URL names.
REPO_URLS = [
    "https://huggingface.co/api/models/my-org/Qwen2.5-7B.v2/revision/main.",
    "https://huggingface.co/my-org/Qwen2.5-7B.v2/resolve/main/config.json.",
    "https://hf-mirror.com/my-org/Qwen2.5-7B.v2/resolve/abc123/tokenizer.json",
]


@pytest.mark.parametrize("url", REPO_URLS)
def test_a_repository_not_found_names_the_repo_of_its_url(url):
    diagnosis = verdict(
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error.",
        f"Repository Not Found for url: {url}",
    )
    assert (str(diagnosis.category), diagnosis.permanent) == ("model_not_found", True)
    assert "The model my-org/Qwen2.5-7B.v2 was not found" in diagnosis.cause


# transformers' AutoTokenizer, each of its wordings over 4.x and 5.x: the class the model
# names is not in this transformers. One no transformers release ships is the
# repository's own code (remote_code: TRUST_REMOTE_CODE); one a release ships, under any
# spelling, needs a newer transformers (model_requirement;
# tests/diagnostics/pack/test_tokenizer_classes.py).
TOKENIZER_CLASS = [
    "ValueError: Tokenizer class MyTokenizer does not exist or is not currently imported.",
    "ValueError: Tokenizer class 'MyTokenizer' specified in the tokenizer config was not "
    "found. The tokenizer may need to be converted or re-saved.",
    "ValueError: Tokenizer class MyTokenizer is not currently imported.",
]
TOKENIZER_FRAME = (
    '  File "/usr/lib/python3/site-packages/transformers/models/auto/tokenization_auto.py", '
    "line 1150, in from_pretrained"
)


@pytest.mark.parametrize("line", TOKENIZER_CLASS)
@pytest.mark.parametrize("frame", [False, True], ids=["bare", "with-frame"])
def test_a_tokenizer_class_transformers_lacks_is_the_repositorys_code_or_newer(line, frame):
    diagnosis = verdict(*([TOKENIZER_FRAME] if frame else []), line)
    assert (str(diagnosis.category), diagnosis.state) == ("remote_code", State.FAILED_PERMANENT)
    assert "MyTokenizer" in diagnosis.cause and "TRUST_REMOTE_CODE=true" in diagnosis.fix
    shipped = verdict(*([TOKENIZER_FRAME] if frame else []), line.replace("My", "Qwen2"))
    assert (str(shipped.category), shipped.state) == ("model_requirement", State.FAILED_PERMANENT)
    assert "Qwen2Tokenizer" in shipped.cause and "newer" in shipped.fix


@pytest.mark.parametrize(
    "line",
    [
        "MemoryError",
        "MemoryError: Unable to allocate 2.00 GiB for an array",
        "OSError: [Errno 12] Cannot allocate memory",
    ],
)
def test_host_memory_exhausted_in_pythons_words_is_oom(line):
    diagnosis = verdict(line)
    assert (str(diagnosis.category), diagnosis.state) == ("oom", State.FAILED_PERMANENT)


# The platform's report of a container the kernel killed for memory, without vLLM's
# traceback: Kubernetes' status (alone or as kubectl describe prints it), systemd's,
# docker inspect's, a batch scheduler's (Slurm), the kernel's (a cgroup's limit too). An
# exit code 137 alone (SIGKILL) does not say why: transient (HOST, above).
@pytest.mark.parametrize(
    "line",
    [
        "OOMKilled",
        "      Reason:       OOMKilled",
        "vllm.service: Failed with result 'oom-kill'.",
        '            "OOMKilled": true,',
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4418273.0. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
        "srun: error: gpu-a100-017: task 0: Out Of Memory",
        "[81234.5678] Memory cgroup out of memory: Killed process 4242 (python3) "
        "total-vm:91234567kB, anon-rss:61234567kB",
    ],
)
def test_a_container_killed_for_memory_is_oom(line):
    diagnosis = classify_lines(["INFO 01-01 00:00:00 [loader.py:1] Loading weights", line])
    assert (str(diagnosis.category), diagnosis.state) == ("oom", State.FAILED_PERMANENT)


# 5. A host without a visible GPU is a fault (another host may have one); a vLLM that has
# no GPU platform is not, since every host of the same setup fails the same way: native
# Windows (or a CPU without the build's instructions) is a requirement, a build without
# its compiled ops is what the image lacks.
NO_DEVICE = "RuntimeError: Failed to infer device type"
WINDOWS_FRAME = (
    '  File "C:\\Users\\me\\proj\\.venv\\Lib\\site-packages\\vllm\\config.py", line 1659, in '
    "__init__"
)
OPS_MISSING = (
    "WARNING 03-05 22:14:10 _custom_ops.py:21] Failed to import from vllm._C with "
    "ModuleNotFoundError(\"No module named 'vllm._C'\")"
)
DRIVER_MISSING = (
    "WARNING 03-05 22:14:10 _custom_ops.py:21] Failed to import from vllm._C with "
    "ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')"
)
# vLLM 0.9 and later: no platform detected, torch is asked for the device "".
NO_DEVICE_V1 = "RuntimeError: Device string must not be empty"
PLATFORM = [
    ([NO_DEVICE], "cuda_fault", State.FAILED_TRANSIENT),
    ([NO_DEVICE_V1], "cuda_fault", State.FAILED_TRANSIENT),
    ([DRIVER_MISSING, *TB, NO_DEVICE_V1], "cuda_fault", State.FAILED_TRANSIENT),
    ([OPS_MISSING, *TB, NO_DEVICE_V1], "other", State.FAILED_PERMANENT),
    (
        ["Traceback (most recent call last):", WINDOWS_FRAME, NO_DEVICE_V1],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    # the driver's library missing is the host's (no GPU given to the container), never
    # what the image lacks, whatever is printed after it
    ([DRIVER_MISSING], "cuda_fault", State.FAILED_TRANSIENT),
    (
        [DRIVER_MISSING, *TB, "RuntimeError: a failure nobody catalogued"],
        "other",
        State.FAILED_TRANSIENT,
    ),
    ([DRIVER_MISSING, *TB, NO_DEVICE], "cuda_fault", State.FAILED_TRANSIENT),
    # vLLM's compiled ops not a module of the install: what the image lacks
    ([OPS_MISSING, *TB, NO_DEVICE], "other", State.FAILED_PERMANENT),
    (
        ["Traceback (most recent call last):", WINDOWS_FRAME, NO_DEVICE],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    # the order matters: a warning after the failure is not its cause
    ([*TB, NO_DEVICE, OPS_MISSING], "cuda_fault", State.FAILED_TRANSIENT),
    # Python's Unix-only modules are missing on native Windows: the host, not the image
    (
        [*TB, "ModuleNotFoundError: No module named 'fcntl'"],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    (
        [*TB, "ModuleNotFoundError: No module named 'resource'"],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    (
        [*TB, "AttributeError: module 'os' has no attribute 'sched_getaffinity'"],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    # a CPU without the instructions the build uses (SIGILL), however the end is reported
    (["Illegal instruction (core dumped)"], "model_requirement", State.FAILED_PERMANENT),
    (
        [
            *TB,
            "RuntimeError: Engine core initialization failed. See root cause above. Failed "
            "core proc(s): {'EngineCore_0': -4}",
        ],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    (
        ["[1873202.41] traps: VLLM::EngineCor[58] trap invalid opcode ip:7f3b sp:7ffd error:0"],
        "model_requirement",
        State.FAILED_PERMANENT,
    ),
    # any other missing module is the image's
    ([*TB, "ModuleNotFoundError: No module named 'fcntl_tools'"], "other", State.FAILED_PERMANENT),
]


@pytest.mark.parametrize(("lines", "category", "state"), PLATFORM)
def test_a_vllm_without_a_gpu_platform_is_permanent_a_host_without_a_gpu_a_fault(
    lines, category, state
):
    diagnosis = classify_lines(lines)
    assert (str(diagnosis.category), diagnosis.state) == (category, state), diagnosis


# 7. A report that points at the error printed before it yields to that error: vLLM's
# "Model architectures [...] failed to be inspected. Please check the logs for more
# details." after the subprocess's own traceback.
INSPECTED = "ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] failed to be "
INSPECTED += "inspected. Please check the logs for more details."
INSPECTION = [
    # alone: an architecture this vLLM (with its transformers) cannot load
    # (the catalogued message names the verdict: its raise site's category)
    ([*TB, INSPECTED], "catalogued-model-requirement", "model_requirement"),
    # after what the image lacks (transformers too old for the model's code)
    (
        [
            "ERROR 02-12 10:17:41 registry.py:306] Error in inspecting model architecture "
            "'Qwen2_5_VLForConditionalGeneration'",
            *TB,
            "ModuleNotFoundError: No module named 'transformers.models.qwen2_5_vl'",
            *TB,
            INSPECTED,
        ],
        "broken-environment",
        "other",
    ),
    # after torchvision built for another torch, in the inspecting subprocess
    (
        [
            "ERROR 03-04 17:22:58 registry.py:306] Error in inspecting model architecture "
            "'Qwen2ForCausalLM'",
            *TB,
            "ERROR 03-04 17:22:58 registry.py:306] RuntimeError: operator torchvision::nms does "
            "not exist",
            *TB,
            INSPECTED,
        ],
        "broken-environment",
        "other",
    ),
]


@pytest.mark.parametrize(("lines", "rule", "category"), INSPECTION)
def test_a_report_that_points_at_the_error_before_it_yields_to_that_error(lines, rule, category):
    diagnosis = classify_lines(lines)
    assert (diagnosis.rule, str(diagnosis.category), diagnosis.permanent) == (rule, category, True)


# huggingface_hub raises RepositoryNotFoundError for the hub's 404 and for every 401 (a
# missing repo, a private one, a token the hub rejects): the hub's own line under it
# names the cause, in each version's layout (before or after transformers' verdict).
HUB_401 = [
    "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-6)",
    "",
    "Repository Not Found for url: https://huggingface.co/acme/llama-awq/resolve/main/config.json.",
    "Please make sure you specified the correct `repo_id` and `repo_type`.",
    "If you are trying to access a private or gated repo, make sure you are authenticated.",
]
TRANSFORMERS_VERDICT = [
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/transformers/utils/hub.py", line 9, in cached_file',
    "OSError: acme/llama-awq is not a local folder and is not a valid model identifier listed "
    "on 'https://huggingface.co/models'",
]


@pytest.mark.parametrize(
    ("hub_line", "category"),
    [
        ("Invalid credentials in Authorization header", "gated_model"),
        ("Invalid username or password.", "model_not_found"),
        (None, "model_not_found"),
    ],
)
@pytest.mark.parametrize("after", [[], TRANSFORMERS_VERDICT])
def test_the_hubs_own_line_under_a_repository_not_found_names_the_cause(hub_line, category, after):
    lines = [*HUB_401, *([hub_line] if hub_line else []), *after]
    diagnosis = classify_lines(lines)
    assert (str(diagnosis.category), diagnosis.state) == (category, State.FAILED_PERMANENT)


# "Invalid username or password." is as ambiguous as the 401 it comes with (a missing
# repo, or a token the hub rejects) when no token was sent: a line that names the token
# decides, wherever it is printed (huggingface_hub's whoami, the hub's header), and vLLM
# 0.6-0.7's lookup summary after the 401 ("No supported config format") says no more
# than the hub did. After a token was sent it is that token refused: the hub answers a
# valid token's request for a missing repo with 404 (hub-token-refused, held-out RF).
TOKEN_NAMED = [
    "Invalid user token. The token from HF_TOKEN environment variable is invalid.",
    "Invalid credentials in Authorization header",
]


@pytest.mark.parametrize("named", TOKEN_NAMED)
@pytest.mark.parametrize("where", ["after", "before"])
def test_a_line_naming_the_token_decides_an_ambiguous_401(named, where):
    hub = [*HUB_401, "Invalid username or password."]
    lines = [*hub, "", "$ huggingface-cli whoami", named] if where == "after" else [named, *hub]
    diagnosis = classify_lines(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("gated_model", State.FAILED_PERMANENT)


# huggingface_hub raises the hub's 401 as RepositoryNotFoundError when the hub says the
# repo is not found (every 401 before 0.14), and as a plain HTTP error when it refused
# the credentials themselves (an invalid, expired or revoked token): the hub's
# "Invalid username or password." under a plain 401 names the token (held-out VJ).
PLAIN_401 = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/huggingface_hub/utils/_errors.py", line 371, '
    "in hf_raise_for_status",
    "    raise HfHubHTTPError(str(e), response=response) from e",
    "huggingface_hub.utils._errors.HfHubHTTPError: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/meta-llama/Llama-2-13b-chat-hf/resolve/main/config.json "
    "(Request ID: Root=1-661e5e54)",
    "",
    "Invalid username or password.",
]


# transformers' wrapper of a plain HTTP error (utils/hub.py cached_file; it says "is not a
# valid model identifier" only for RepositoryNotFoundError)
CONNECTION_WRAPPER = [
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/transformers/utils/hub.py", line 462, in cached_file',
    "OSError: There was a specific connection error when trying to load "
    "meta-llama/Llama-2-13b-chat-hf:",
    "401 Client Error: Unauthorized for url: "
    "https://huggingface.co/meta-llama/Llama-2-13b-chat-hf/resolve/main/config.json",
    "",
    "Invalid username or password.",
]


@pytest.mark.parametrize("after", [[], CONNECTION_WRAPPER])
def test_the_hubs_words_under_a_plain_401_are_the_token_refused(after):
    diagnosis = classify_lines([*PLAIN_401, *after])
    assert (str(diagnosis.category), diagnosis.state) == ("gated_model", State.FAILED_PERMANENT)
    # under RepositoryNotFoundError the same words stay a repo the hub does not show
    assert str(classify_lines([*HUB_401, "Invalid username or password."]).category) == (
        "model_not_found"
    )
    assert str(classify_lines(["Invalid username or password."]).category) == "model_not_found"


TOKEN_SENT = "$ HF_TOKEN=$TOKEN vllm serve google/gemma-2-9b-it"


@pytest.mark.parametrize(
    "hub_line, category",
    [("Invalid username or password.", "gated_model"), (None, "model_not_found")],
)
def test_vllms_lookup_summary_yields_to_the_hubs_answer_before_it(hub_line, category):
    lines = [TOKEN_SENT, *HUB_401, *([hub_line] if hub_line else []), *TB, LOOKUP]
    diagnosis = classify_lines(lines)
    assert (str(diagnosis.category), diagnosis.state) == (category, State.FAILED_PERMANENT)
    assert classify_lines(lines).rule != "hub-lookup-refused"  # the hub's answer decides
    # alone after a token was sent it is the hub refusing that token; without one, a
    # repo the hub does not show (a gated one would have raised its own error)
    assert str(classify_lines([TOKEN_SENT, *TB, LOOKUP]).category) == "gated_model"
    assert str(classify_lines([*TB, LOOKUP]).category) == "model_not_found"


# huggingface_hub's warnings that a request failed and is retried: the hub may answer the
# next try, so a cause the start printed after them wins; alone, the network it was.
RETRIED = [
    "'(ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed "
    "out. (read timeout=10)\"), '(Request ID: 9d2b)')' thrown while requesting HEAD "
    "https://huggingface.co/google/flan-t5-xl/resolve/main/config.json",
    "Retrying in 1s [Retry 1/5].",
]
UNSUPPORTED = (
    "ValueError: Model architectures ['T5ForConditionalGeneration'] are not supported for "
    "now. Supported architectures: ['LlamaForCausalLM']"
)


def test_a_retried_hub_request_yields_to_the_cause_the_start_printed_after_it():
    diagnosis = classify_lines([*RETRIED, UNSUPPORTED])
    assert (str(diagnosis.category), diagnosis.state) == (
        "model_requirement",
        State.FAILED_PERMANENT,
    )
    alone = classify_lines(RETRIED)
    assert (alone.rule, alone.state) == ("hub-request-retried", State.FAILED_TRANSIENT)
    assert "huggingface.co/google/flan-t5-xl" in alone.cause


def test_a_retry_logged_as_a_warning_is_outgrown_by_the_download_going_on():
    """V1 downloads once the load has begun: huggingface_hub's retry, logged below ERROR,
    then the shards' download going on is a start under way (held-out UP), in either
    order of phases; the retries alone, or before a new start, are the network."""
    prefix = "(EngineCore_0 pid=266) (VllmWorker TP0 pid=272) "
    loading = (
        f"{prefix}INFO 08-22 05:10:25 [gpu_model_runner.py:1953] Starting to load model org/m..."
    )
    warned = [f"{prefix}WARNING 08-22 05:10:57 [_http.py:95] {line}" for line in RETRIED]
    bar = "model-00005-of-00014.safetensors:  66%|██████▌   | 3.05G/4.63G [00:38<00:19, 80.9MB/s]"
    assert classify_lines([loading, *warned, bar]).state is State.DOWNLOADING
    assert classify_lines([loading, *warned]).state is State.FAILED_TRANSIENT


# A connection refused, raised without its host: a client of vLLM's own API whose server
# did not start says so too, so the start's own cause wins; after the hub's client said
# which requests it retried, it is the hub's.
REFUSED = "httpcore.ConnectError: [Errno 111] Connection refused"
TOOL_CHOICE = "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"


def test_a_bare_connection_refused_is_the_hubs_only_after_its_retries():
    diagnosis = classify_lines([TOOL_CHOICE, "", "$ python agent.py", REFUSED])
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)
    alone = classify_lines([REFUSED])
    assert (alone.rule, str(alone.category), alone.state) == (
        "connection-refused",
        "network",
        State.FAILED_TRANSIENT,
    )
    hub = RETRIED[0].replace("ReadTimeoutError(...)", "")
    assert classify_lines([hub, REFUSED]).rule == "hub-connection-refused"


# A server that is up shows it in more than uvicorn's lines: the routes it lists as it
# starts to serve (a paste of stdout alone, without uvicorn's stderr, keeps them). Not
# the engine's periodic stats: they go on a while after an engine died while serving.
LOADING = "INFO 10-30 08:11:02 model_runner.py:1067] Loading model weights took 7.12 GB"


@pytest.mark.parametrize(
    "routes",
    [
        "INFO 10-30 08:11:15 launcher.py:19] Available routes are:",
        # one route, the list's header elided (held-out ANG)
        "INFO 02-14 07:24:10 launcher.py:34] Route: /v1/chat/completions, Methods: POST",
        "(APIServer pid=1) INFO 10-14 07:55:03 [launcher.py:44] Route: /openapi.json, "
        "Methods: GET, HEAD",
    ],
)
def test_a_server_that_serves_is_up_without_uvicorns_lines(routes):
    assert classify_lines([LOADING]).state is State.LOADING
    assert classify_lines([LOADING, routes]).state is State.READY


def test_numpys_abi_warning_is_forgotten_by_a_start_that_goes_on():
    """torch built against NumPy 1.x warns under NumPy 2 and goes on without numpy; an
    extension that needs it fails its import. The warning alone ends the start only
    where nothing after it shows the start going on."""
    warned = [
        "A module that was compiled using NumPy 1.x cannot be run in",
        "NumPy 2.0.0 as it may crash. To support both 1.x and 2.x",
        "versions of NumPy, modules must be compiled with NumPy 2.0.",
    ]
    assert classify_lines(warned).state is State.FAILED_PERMANENT
    assert classify_lines([*warned, LOADING]).state is State.LOADING


def test_a_marker_counts_only_where_its_whole_pattern_matches():
    """`when: after` markers are found by the block database, which holds patterns
    without their anchors: a login run is a marker at a prompt, not inside an echo
    that says it was skipped (found by the database, refused by the whole regex)."""
    skipped = "+ echo 'HF_TOKEN is not set; skipping huggingface-cli login'"
    assert str(classify_lines([skipped, *TB, LOOKUP]).category) == "model_not_found"
    ran = "$ huggingface-cli login --token $TOKEN"
    assert str(classify_lines([ran, *TB, LOOKUP]).category) == "gated_model"


# vLLM names an architecture it has no implementation of twice: as a warning when it falls
# back to the Transformers implementation (the start goes on), and as the error when that
# implementation cannot serve either. Only the error is a cause.
FALLBACK = (
    "WARNING 08-25 21:14:39 [registry.py:531] DogeForCausalLM has no vLLM implementation, "
    "falling back to Transformers implementation. Some features may not be supported and "
    "performance may not be optimal."
)
NO_FALLBACK = (
    "ValueError: DogeForCausalLM has no vLLM implementation and the Transformers "
    "implementation is not compatible with vLLM."
)
REMOTE_IMPORT = [
    "Traceback (most recent call last):",
    '  File "/root/.cache/huggingface/modules/transformers_modules/org/m/modeling_doge.py",'
    " line 40, in <module>",
    "    from transformers.utils import LossKwargs",
    "ImportError: cannot import name 'LossKwargs' from 'transformers.utils'",
]


def test_the_transformers_fallback_warning_is_not_a_cause():
    assert classify_lines([LOADING, FALLBACK]).state is State.LOADING
    after = classify_lines([FALLBACK, *REMOTE_IMPORT])
    assert (str(after.category), after.state) == ("remote_code", State.FAILED_PERMANENT)
    error = classify_lines([FALLBACK, "Traceback (most recent call last):", NO_FALLBACK])
    assert (error.rule, error.state) == ("architecture-not-supported", State.FAILED_PERMANENT)


# Another program's error report quoting the exception its start of vLLM raised (Triton's
# vLLM backend) is that exception: catalogued, its raise site decides; a warning of the
# same shape is not a failed start.
GEMMA2 = (
    "Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). "
    "Otherwise, the output might be wrong. Set Flashinfer backend by export "
    "VLLM_ATTENTION_BACKEND=FLASHINFER."
)
TRITON_REPORTS = [
    'E0716 13:05:27.118442 1 backend_model.cc:692] "ERROR: Failed to create instance: '
    "ValueError: {msg}",
    "E0716 13:05:27.118563 1 model_lifecycle.cc:641] \"failed to load 'gemma2_9b' version 1: "
    "Internal: ValueError: {msg}",
]


@pytest.mark.parametrize("report", TRITON_REPORTS)
def test_an_exception_quoted_in_another_programs_error_report_is_that_exception(report):
    lines = [LOADING, report.format(msg=GEMMA2), "error: creating server: Internal - failed"]
    diagnosis = classify_lines(lines)
    assert (str(diagnosis.category), diagnosis.state) == (
        "model_requirement",
        State.FAILED_PERMANENT,
    )
    unknown = classify_lines([LOADING, report.format(msg="a message nobody catalogued")])
    assert (unknown.rule, unknown.state) == ("unhandled-exception", State.FAILED_TRANSIENT)


def test_a_warning_quoting_an_exception_is_not_a_failed_start():
    warning = (
        "WARNING 10-30 08:10:03 utils.py:120] Failed to initialize backend foo: "
        "ModuleNotFoundError: No module named 'foo'"
    )
    assert classify_lines([LOADING, warning, LOADING]).state is State.LOADING


# What a requested shutdown prints is the shutdown's: a specific cause found before the
# stopping marker stands (a torn-down CUDA context's error in a thread still running does
# not become a device fault); a consequence before it does not hold back the cause after.
BIND = (
    "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
    "address already in use"
)
SHUTDOWN = "INFO:     Waiting for application shutdown."
TEARDOWN = [
    "Exception in thread Thread-4 (_report_usage_worker):",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: initialization error",
]


def test_a_cause_found_before_a_requested_shutdown_stands():
    up = [LOADING, "INFO:     Application startup complete."]
    stands = classify_lines([*up, BIND, SHUTDOWN, *TEARDOWN])
    assert (stands.rule, str(stands.category)) == ("port-in-use", "other")
    unasked = classify_lines([*up, BIND, *TEARDOWN])
    assert str(unasked.category) == "cuda_fault"  # a device fault outranks, unasked
    worker_died = (
        "ERROR 07-24 10:17:06 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid "
        "3170 died, exit code -15"
    )
    kv = (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of "
        "tokens that can be stored in KV cache (8000). Try increasing gpu_memory_utilization "
        "or decreasing max_model_len when initializing the engine."
    )
    after = classify_lines([LOADING, worker_died, SHUTDOWN, kv])
    assert after.rule == "kv-cache-max-len-above-capacity"
