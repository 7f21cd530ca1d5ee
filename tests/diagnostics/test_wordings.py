"""Start-up failure wordings across vLLM's history (0.1-0.32), huggingface_hub (0.16 on),
transformers (4.34 on), torch and ray, each as a paste shows it: the exception line
alone, with its continuation lines, or the last lines of a traceback without its
header. Every example is judged failed, with the category and permanence the corpus
conventions give (../shared/corpus/README.md); no cuda_fault or network wording is
permanent. Wordings come from the sources the catalogue is mined from
(scripts/mine_catalogue.py) and from the messages they build at run time."""

from __future__ import annotations

import io

import pytest

from diagnostics.model import State
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import shipped_pack

PACK = shipped_pack()

# (lines of the paste, category, permanent)
WORDINGS: list[tuple[list[str], str, bool]] = [
    # The hub's 401 "Invalid username or password." (under RepositoryNotFoundError, then
    # transformers' "not a valid model identifier"): a token sent before it was refused
    # (the hub answers a valid token's request for a missing repo with 404; held-out RF);
    # with none sent, a repo it will not show: missing.
    *(
        (
            [
                *before,
                "huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. "
                "(Request ID: Root=1-6570ab12-3c4d)",
                "Repository Not Found for url: https://huggingface.co/acme-ml/llama2-13b-sft/"
                "resolve/main/config.json.",
                "Invalid username or password.",
                "OSError: acme-ml/llama2-13b-sft is not a local folder and is not a valid model "
                "identifier listed on 'https://huggingface.co/models'",
            ],
            category,
            True,
        )
        for before, category in (
            (["docker run --gpus all -e HF_TOKEN=hf_*** vllm/vllm-openai:v0.2.7"], "gated_model"),
            (["$ huggingface-cli login", "Login successful"], "gated_model"),
            ([], "model_not_found"),
            (["docker run --gpus all -e HF_TOKEN= vllm/vllm-openai:v0.2.7"], "model_not_found"),
        )
    ),
    # torch's message listing the processes without "this process has", ending in "but
    # not allocated" (held-out RB): another process holds most of the GPU, transient
    (
        [
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. "
            "GPU 0 has a total capacity of 79.14 GiB of which 402.75 MiB is free. Process 1874305 "
            "has 61.52 GiB memory in use. Process 1921113 has 17.21 GiB memory in use. Of the "
            "allocated memory 16.58 GiB is allocated by PyTorch, and 129.40 MiB is reserved by "
            "PyTorch but not allocated.",
        ],
        "oom",
        False,
    ),
    # pip, installing at start-up, could not reach its index: its last retry failed on
    # the connection, and what it did not install is missing (held-out RG)
    (
        [
            "+ pip install --no-cache-dir vllm==0.7.3",
            "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, "
            "status=None)) after connection broken by 'NewConnectionError('<pip._vendor."
            "urllib3.connection.HTTPSConnection object at 0x7f5e2c1d9a50>: Failed to establish "
            "a new connection: [Errno -3] Temporary failure in name resolution')': /simple/vllm/",
            "ERROR: Could not find a version that satisfies the requirement vllm==0.7.3 (from "
            "versions: none)",
            "/usr/bin/python3: Error while finding module specification for 'vllm.entrypoints."
            "openai.api_server' (ModuleNotFoundError: No module named 'vllm')",
        ],
        "network",
        False,
    ),
    # Building vLLM at start-up: nvcc refusing the image's gcc, setup.py without a CUDA
    # torch (what the image lacks: permanent) or on another system than Linux (the
    # platform: model_requirement) (held-out RG)
    (
        [
            "/usr/local/cuda/bin/../targets/x86_64-linux/include/crt/host_config.h:143:2: "
            "error: #error -- unsupported GNU version! gcc versions later than 12 are not "
            "supported! The nvcc flag '-allow-unsupported-compiler' can be used to override "
            "this version check",
        ],
        "other",
        True,
    ),
    (["      RuntimeError: Unknown runtime environment"], "other", True),
    (
        ["      AssertionError: vLLM only supports Linux platform (including WSL)."],
        "model_requirement",
        True,
    ),
    # An Intel GPU image without Intel's extension for PyTorch: no platform vLLM can run
    # on, what the image lacks (held-out RQ); without the warning, a host without a GPU
    *(
        (
            [
                *before,
                "ERROR 01-21 14:33:28 engine.py:366] RuntimeError: Failed to infer device type",
            ],
            category,
            permanent,
        )
        for before, category, permanent in (
            (
                [
                    "WARNING 01-21 14:33:20 _ipex_ops.py:12] Import error msg: No module named "
                    "'intel_extension_for_pytorch'"
                ],
                "other",
                True,
            ),
            ([], "cuda_fault", False),
        )
    ),
    # ModelScope's client's NotExistError: a model, revision or file its hub does not
    # have (modelscope/hub/api.py; held-out RF)
    (
        [
            "qwen-vllm  | modelscope.hub.errors.NotExistError: The model: qwen/Qwen-14B-Chat-Int4 "
            "has no revision : v1.0.0 valid are: [v1.0.7, v1.0.6, v1.0.5]!",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "NotExistError: The file path: config.json not exist in: qwen/Qwen2-7B-Instruct",
        ],
        "model_not_found",
        True,
    ),
    # NVSHMEM (DeepEP's and pplx's all-to-all kernels) could not set up: the GPUs' link,
    # as NCCL's failures (held-out QY); a line of it without "failed" says nothing.
    (
        [
            "(EngineCore_0 pid=88430) /workspace/nvshmem_src/src/modules/transport/ibgda/"
            "ibgda.cpp:3873: NULL value mem registration failed.",
            "(EngineCore_0 pid=88430) /workspace/nvshmem_src/src/host/init/init.cu:"
            "nvshmemi_check_state_and_init:1080: nvshmem initialization failed, exiting ",
            "(EngineCore_0 pid=88430) ERROR 05-14 09:31:16 [core.py:700] EngineCore failed to start.",
        ],
        "cuda_fault",
        False,
    ),
    (
        ["ERROR 05-14 09:31:16 [core.py:700] nvshmem initialization failed, exiting"],
        "cuda_fault",
        False,
    ),
    # torchrun's report that a rank it launched failed is a consequence: what the rank
    # printed before it (NCCL's watchdog here) names why (held-out QY); alone, a
    # failure of no named cause.
    (
        [
            "[rank4]:[E514 09:31:16.402118733 ProcessGroupNCCL.cpp:629] [Rank 4] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.",
            "E0514 09:31:17.102000 5580 torch/distributed/elastic/multiprocessing/api.py:869] "
            "failed (exitcode: -6) local_rank: 4 (pid: 5594) of binary: /usr/bin/python3",
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        ],
        "other",
        False,
    ),
    # NFS's stale handle (the export changed under the client: another mount reads
    # it); Python's tempfile with no folder it may write (a read-only root: the same
    # container fails the same way); docker inspect's OOMKilled asked with more fields.
    (
        [
            "ERROR 01-28 22:51:30 multiproc_worker_utils.py:236] OSError: [Errno 116] Stale file handle: "
            "'/mnt/nfs/models/Qwen2.5-72B-Instruct/model.safetensors.index.json'",
        ],
        "other",
        False,
    ),
    (
        [
            "FileNotFoundError: [Errno 2] No usable temporary directory found in "
            "['/tmp', '/var/tmp', '/usr/tmp', '/vllm-workspace']",
        ],
        "other",
        True,
    ),
    (
        [
            "vllm-1 exited with code 137",
            "$ docker inspect --format '{{.State.OOMKilled}} {{.State.ExitCode}} {{.HostConfig.Memory}}' vllm-vllm-1",
            "true 137 17179869184",
        ],
        "oom",
        True,
    ),
    # A reasoning or tool-call parser chosen for another model family: its markers are
    # not in this model's tokenizer (the option's).
    (
        [
            "ERROR 07-10 18:04:15 [core.py:586] RuntimeError: DeepSeek R1 reasoning parser could not "
            "locate think start/end tokens in the tokenizer!",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "RuntimeError: Hermes 2 Pro Tool parser could not locate tool call start/end tokens in the tokenizer!"
        ],
        "bad_config",
        True,
    ),
    # The model's volume that did not mount before the start: vLLM's missing path after
    # it is a consequence (transient: the storage or the network to it).
    (
        [
            "Jan 14 06:03:41 gpu-node-07 mount[1184]: mount.nfs: Connection timed out",
            "Jan 14 06:03:41 gpu-node-07 systemd[1]: Failed to mount mnt-models.mount - /mnt/models.",
            "Jan 14 06:04:01 gpu-node-07 vllm[2231]: huggingface_hub.errors.HFValidationError: Repo id must be in "
            "the form 'repo_name' or 'namespace/repo_name': '/mnt/models/m'. Use `repo_type` argument if needed.",
        ],
        "other",
        False,
    ),
    (
        [
            '  Warning  FailedMount  2m  kubelet  MountVolume.SetUp failed for volume "models" : mount failed: exit status 32',
        ],
        "other",
        False,
    ),
    # AWS Neuron's runtime: its cores held by another process (a device fault).
    (
        [
            "2024-Oct-15 09:38:02.0884 41502:41502 ERROR  NRT:nrt_allocate_neuron_cores               "
            "Logical Neuron Core(s) not available - Requested:lnc0-lnc1 Available:0 Logical Core size:1",
            "RuntimeError: Neuron runtime cannot be initialized; cannot determine the number of available NeuronCores",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: Neuron runtime cannot be initialized; cannot determine the number of available NeuronCores"
        ],
        "cuda_fault",
        False,
    ),
    # A notebook's kernel that died under the start, no cause printed (transient).
    (
        [
            "INFO 01-16 11:05:44 llm_engine.py:70] Initializing an LLM engine with config: model='m'",
            "Kernel Restarting",
            "The kernel for serve.ipynb appears to have died. It will restart automatically.",
        ],
        "other",
        False,
    ),
    (
        [
            "INFO 01-16 11:05:44 [loader.py:1] Loading weights",
            "The Kernel crashed while executing code in the current cell or a previous cell. Please review the code in the cell(s) to identify a possible cause of the failure.",
        ],
        "other",
        False,
    ),
    # A notebook's notice of its runtime killed for memory, after the start's lines.
    (
        [
            "pytorch_model-00002-of-00002.bin: 100% 3.50G/3.50G [00:26<00:00, 133MB/s]",
            "Your session crashed after using all available RAM. If you are interested in access to high-RAM runtimes, you may want to check out Colab Pro.",
        ],
        "oom",
        True,
    ),
    (
        ["Your notebook tried to allocate more memory than is available. It has restarted."],
        "oom",
        True,
    ),
    # docker inspect asked for OOMKilled by a format string: its bare answer decides.
    (
        [
            "Exited (137) 48 seconds ago",
            "$ docker inspect -f '{{.State.OOMKilled}} {{.State.ExitCode}}' 9b2e0f6c1a7d",
            "true 137",
        ],
        "oom",
        True,
    ),
    (
        [
            "Exited (137) 48 seconds ago",
            "$ docker inspect -f '{{.State.OOMKilled}} {{.State.ExitCode}}' 9b2e0f6c1a7d",
            "false 137",
        ],
        "other",
        False,
    ),
    # The GPU-count check written with its factors; Gloo's receive another rank never
    # answered (the CPU group's timeout: the ranks' link, as NCCL's watchdog).
    (
        [
            "ERROR 06-28 10:03:03 [core.py:586] AssertionError: tensor_parallel_size (8) x "
            "pipeline_parallel_size (2) = 16 is larger than the number of available GPUs (8) in this node.",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "(VllmWorker rank=4 pid=915) ERROR 06-11 08:47:16 [multiproc_executor.py:470] RuntimeError: "
            "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
            "ERROR 06-11 08:47:16 [core.py:515] RuntimeError: Worker failed with error '[../third_party/gloo/gloo/"
            "transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete', please "
            "check the stack trace above for the root cause",
        ],
        "cuda_fault",
        False,
    ),
    # vLLM's lookup of a name without an organisation (a served name passed as the model):
    # no folder and no repo by that name (LJ).
    (
        [
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py",'
            " line 201, in get_config",
            '    raise ValueError(f"No supported config format found in {model}")',
            "ValueError: No supported config format found in llama3-8b",
        ],
        "model_not_found",
        True,
    ),
    # The API server's bind of a --host that names no address ("http://0.0.0.0"): the
    # resolver's answer is the setting's, not the network's (LJ).
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.11/site-packages/vllm/entrypoints/openai/api_server.py", '
            "line 709, in create_server_socket",
            "    sock.bind(addr)",
            "socket.gaierror: [Errno -2] Name or service not known",
        ],
        "bad_config",
        True,
    ),
    # vLLM's own check that the backend chosen imports: the image lacks it (MA).
    (
        ["ValueError: Failed to import Ray, please check if Ray is installed correctly."],
        "other",
        True,
    ),
    # Out of memory while vLLM's worker sets up its device (init_device: before a weight
    # is loaded), V0's and V1's: other processes hold the GPU (LY's earlier vLLM still
    # running); the same words while loading the model are the model's, permanent.
    *(
        (
            [
                "Traceback (most recent call last):",
                f'  File "/usr/lib/python3/site-packages/vllm/{worker}", line 95, in {where}',
                f"    {call}",
                "RuntimeError: CUDA error: out of memory",
            ],
            "oom",
            where == "load_model",
        )
        for worker, where, call in (
            ("worker/worker.py", "init_device", "torch.cuda.empty_cache()"),
            ("v1/worker/gpu_worker.py", "init_device", "self.init_snapshot = MemorySnapshot()"),
            ("v1/worker/gpu_worker.py", "load_model", "self.model_runner.load_model()"),
        )
    ),
    # vLLM 0.4's wait for its Ray placement group timing out: the cluster lacks the GPUs
    # the parallelism asks for (JY, a Ray Serve replica holding one of them).
    (
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.10/site-packages/vllm/executor/ray_utils.py", '
            "line 107, in initialize_ray_cluster",
            "    ray.get(current_placement_group.ready(), timeout=1800)",
            '  File "/opt/venv/lib/python3.10/site-packages/ray/_private/worker.py", line 2667, '
            "in get",
            "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
        ],
        "bad_config",
        True,
    ),
    # The hub's cache under a home of / (an arbitrary user id without a home folder, as
    # OpenShift runs containers): the user's, as a user without a passwd entry (LQ, LB);
    # a cache folder of a mount not writable stays the mount's, permanent.
    (
        ["PermissionError: [Errno 13] Permission denied: '/.cache'"],
        "other",
        False,
    ),
    (
        ["PermissionError: [Errno 13] Permission denied: '/.cache/huggingface/hub'"],
        "other",
        False,
    ),
    (
        ["PermissionError: [Errno 13] Permission denied: '/runpod-volume/.cache/huggingface'"],
        "other",
        True,
    ),
    # every dot-folder of / is a home of /'s (~/.triton, ~/.config: held-out KP, QQ)
    *(
        ([f"{exc}: [Errno 13] Permission denied: '{path}'"], "other", False)
        for exc, path in (
            ("OSError", "/.config/vllm"),
            ("PermissionError", "/.triton"),
            ("PermissionError", "/.triton/cache/3f2a"),
            ("PermissionError", "/.cargo/registry"),
            ("PermissionError", "/.cached"),
            ("PermissionError", "/.cach"),
        )
    ),
    # a folder elsewhere (one that shares a prefix with /dev, a device's, too) is a
    # folder not writable, permanent
    *(
        ([f"PermissionError: [Errno 13] Permission denied: '{path}'"], "other", True)
        for path in (
            "/deploy/models",
            "/devel/x",
            "/de",
            "/models/.cache",
            "models/x",
        )
    ),
    # Gloo could not link the ranks (its full mesh across hosts, a peer's connection
    # closed): the ranks' link or another rank, transient; Gloo is no GPU's or NCCL's,
    # so other (held-out KW; writers seven sets to two, stop 66).
    (
        [
            "(RayWorkerWrapper pid=2231, ip=10.0.1.12) ERROR 12-02 11:48:47 worker_base.py:467] "
            "RuntimeError: Gloo connectFullMesh failed with "
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
        ],
        "other",
        False,
    ),
    (
        [
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
            "closed by peer [10.0.1.12]:43817",
        ],
        "other",
        False,
    ),
    # No weights of the load format the start forced (logged among its arguments or in
    # its engine config): the format chosen (bad_config); with auto, the folder's.
    (
        [
            "INFO 03-12 10:00:00 llm_engine.py:70] Initializing an LLM engine with config: model='/m', load_format=safetensors, tensor_parallel_size=1",
            "RuntimeError: Cannot find any model weights with `/m`",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "INFO 01-29 15:40:10 [utils.py:326] non-default args: {'model': '/models/v', 'load_format': 'runai_streamer'}",
            "ERROR 01-29 15:40:17 engine.py:387] Cannot find any safetensors model weights with `/models/v`",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "INFO 03-12 10:00:00 llm_engine.py:70] Initializing an LLM engine with config: model='/m', load_format=LoadFormat.AUTO, tensor_parallel_size=1",
            "RuntimeError: Cannot find any model weights with `/m`",
        ],
        "model_not_found",
        True,
    ),
    # Two features the user switched on, the limit written with the first first: the
    # options (bad_config); a model's own limit in the same words stays the model's.
    (["> ValueError: LoRA is not supported with chunked prefill yet."], "bad_config", True),
    (
        [
            "ValueError: Speculative decoding is not supported with multi-step (--num-scheduler-steps > 1)"
        ],
        "bad_config",
        True,
    ),
    (
        [
            "NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the `SupportsPP` interface."
        ],
        "model_requirement",
        True,
    ),
    # The image's CUDA toolkit older than the GPU a JIT kernel (FlashInfer's ninja
    # build, Triton's ptxas) compiles for: the same image fails the same way.
    (
        [
            "ERROR 06-03 21:17:55 [core.py:500] RuntimeError: Ninja build failed. Ninja output:",
            "ERROR 06-03 21:17:55 [core.py:500] FAILED: batch_prefill.cuda.o",
            "ERROR 06-03 21:17:55 [core.py:500] nvcc fatal   : Unsupported gpu architecture 'compute_120a'",
        ],
        "other",
        True,
    ),
    (["ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'"], "other", True),
    (["RuntimeError: Ninja build failed. Ninja output:"], "other", True),
    # transformers' fast tokenizer without the package its slow one needs (no "Please").
    (
        [
            "ValueError: Cannot instantiate this tokenizer from a slow version. If it's based "
            "on sentencepiece, make sure you have sentencepiece installed.",
        ],
        "other",
        True,
    ),
    # transformers' dynamic-modules cache changed under the start (replicas sharing it).
    (
        [
            "    init_path.touch()",
            "FileNotFoundError: [Errno 2] No such file or directory: "
            "'/mnt/nfs/hf/modules/transformers_modules/org/repo/__init__.py'",
        ],
        "other",
        False,
    ),
    (
        [
            "FileExistsError: [Errno 17] File exists: "
            "'/root/.cache/huggingface/modules/transformers_modules/org/repo'",
        ],
        "other",
        False,
    ),
    # A weight file opened by its path that is not there: a folder of the user's
    # (tensorizer's URI here) is model_not_found; one the hub cache's snapshot lists
    # but does not hold is a download to repeat.
    (
        [
            "[rank0]:     handle: typing.BinaryIO = open(path_uri, mode)",
            "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: '/mnt/tensorized/m/v1/model.tensors'",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "FileNotFoundError: [Errno 2] No such file or directory: "
            "'/root/.cache/huggingface/hub/models--a--b/snapshots/0a1b/model-00002-of-00004.safetensors'",
        ],
        "network",
        False,
    ),
    # gguf's reader on a file shorter than its header says (a cut download): numpy's
    # reshape refusal read through gguf_reader's frames is network; the same words in
    # model code are not.
    (
        [
            'vllm-1  |   File "/usr/local/lib/python3.12/dist-packages/gguf/gguf_reader.py", line 314, in _build_tensors',
            "vllm-1  |     data = self._get(data_offs, item_type, item_count).reshape(np_dims),",
            "vllm-1  | ValueError: cannot reshape array of size 0 into shape (14336,2304)",
        ],
        "network",
        False,
    ),
    (
        [
            'File "/usr/lib/python3/site-packages/gguf/gguf_reader.py", line 130, in __init__',
            "ValueError: cannot reshape array of size 1024 into shape (4096,11008)",
        ],
        "network",
        False,
    ),
    (
        [
            'File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/models/llama.py", line 412, in load_weights',
            "    loaded_weight = loaded_weight.reshape(shape)",
            "ValueError: cannot reshape array of size 4096 into shape (4096,4096)",
        ],
        "other",
        True,
    ),
    # A platform's report of the exit, after the start's last lines: a failed start (a
    # SIGKILL or any other code, a cause not printed: transient).
    (
        [
            "INFO 05-01 10:00:00 [loader.py:1] Loading safetensors checkpoint shards:  50% Completed | 1/2",
            "worker exited with exit code 137",
        ],
        "other",
        False,
    ),
    (
        ["INFO 05-01 10:00:00 [loader.py:1] Loading weights", "worker exited with exit code 1"],
        "other",
        False,
    ),
    (
        ["vllm-1  | INFO 05-01 10:00:00 Loading weights", "vllm-1 exited with code 1"],
        "other",
        False,
    ),
    (["Last State:     Terminated", "  Reason:       Error", "  Exit Code:    1"], "other", False),
    (
        ["vllm.service: Main process exited, code=exited, status=1/FAILURE"],
        "other",
        False,
    ),
    # The end of vLLM 0.8's "Invalid repository ID or local directory specified" alone.
    (
        [
            "Please verify the following requirements:",
            "1. Provide a valid Hugging Face repository ID.",
            "2. Specify a local directory that contains a recognized configuration file.",
            "   - For Hugging Face models: ensure the presence of a 'config.json'.",
        ],
        "model_not_found",
        True,
    ),
    # A requirement stated as "not supported yet"; a checkpoint's bits a quantization
    # method cannot run (the checkpoint, not a chosen value).
    (
        ["ValueError: GGUF model with architecture deepseek2 is not supported yet."],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Currently, only 4-bit weight quantization is supported for AWQ, but got 8 bits."
        ],
        "model_requirement",
        True,
    ),
    # What is left for the KV cache, as the log states it before the error (a paste may
    # stop there): vLLM 0.6.4 on names the device in the block count; V1 logs the memory.
    (
        ["INFO 11-02 10:00:00 executor_base.py:83] # cuda blocks: 0, # CPU blocks: 2048"],
        "kv_cache",
        True,
    ),
    (
        ["INFO 05-01 10:00:00 [gpu_worker.py:227] Available KV cache memory: -2.41 GiB"],
        "kv_cache",
        True,
    ),
    (["INFO 05-01 10:00:00 [kv_cache_utils.py:716] GPU KV cache size: 0 tokens"], "kv_cache", True),
    (
        ["RuntimeError: GPUs with compute capability below 7.0 are not supported."],
        "model_requirement",
        True,
    ),
    # A checkpoint that lacks a parameter the model needs (vLLM's default loader).
    (
        [
            "ValueError: Following weights were not initialized from checkpoint: "
            "{'model.layers.0.mlp.gate.weight'}",
        ],
        "model_requirement",
        True,
    ),
    # torch.load on a truncated .bin checkpoint: a download cut short.
    (
        [
            "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
            "central directory",
        ],
        "network",
        False,
    ),
    # A kernel's C++ check of the device (TORCH_CHECK), printed without a traceback.
    (
        ["RuntimeError: cutlass_scaled_mm not implemented for current compute capability: 75"],
        "model_requirement",
        True,
    ),
    (
        [
            "RuntimeError: No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: 75",
        ],
        "model_requirement",
        True,
    ),
    # The container runtime refusing a host whose driver is older than the image needs:
    # another host may have a newer one.
    (
        [
            "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda container: unknown.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "torch._inductor.exc.InductorError: RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0",
        ],
        "model_requirement",
        True,
    ),
    # docker inspect's State as compact JSON: the container killed for its memory limit;
    # the flag by a format string that names it (held-out QO), set or not.
    (
        ['{"Status":"exited","Running":false,"OOMKilled":true,"Dead":false,"ExitCode":137}'],
        "oom",
        True,
    ),
    *(
        (["Exited (137) 2 minutes ago", answer], category, permanent)
        for answer, category, permanent in (
            ("OOMKilled=true ExitCode=137 FinishedAt=2025-05-06T11:36:01.884120532Z", "oom", True),
            ("OOMKilled: true, ExitCode: 137", "oom", True),
            ("OOMKilled=false ExitCode=137", "other", False),
            ("OOMKilled=trueish", "other", False),
        )
    ),
    # A program the start runs, not in the image (subprocess names it bare); nvidia-smi,
    # which the GPU's container runtime mounts, is the host's.
    (["FileNotFoundError: [Errno 2] No such file or directory: 'neuronx-cc'"], "other", True),
    (["FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'"], "cuda_fault", False),
    # A library named as not available, the whole message (vLLM's RuntimeError after its
    # own failed import): the image lacks it; a device in those words is the host's.
    (["RuntimeError: NIXL is not available"], "other", True),
    # the standard library's Enum rejecting a value vLLM looks up among its choices
    (["ValueError: 'safetensor' is not a valid LoadFormat"], "bad_config", True),
    (
        ["  Value error, 'flashinfers' is not a valid AttentionBackendEnum [type=value_error"],
        "bad_config",
        True,
    ),
    # a client waiting for vLLM's API quotes the refused connection in its own line: a
    # consequence of the start, not the hub's network
    (
        [
            "[bench] server not ready (ConnectError: [Errno 111] Connection refused), retrying",
            "ValueError: 'safetensor' is not a valid LoadFormat",
        ],
        "bad_config",
        True,
    ),
    # vLLM 0.6-0.7's failed config lookup for a hub id: after a revision the start asked
    # for, that revision is missing; without one, after a token was sent, the hub refused
    # it (gated_model); without a token, no such repo or no config.json (model_not_found)
    (
        [
            "INFO 09-20 12:44:03 api_server.py:496] args: Namespace(model='Qwen/Q-7B', "
            "revision='v1.0', tokenizer_revision=None)",
            "ValueError: No supported config format found in Qwen/Q-7B",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            '  --env "HUGGING_FACE_HUB_TOKEN=<secret>" \\',
            "INFO 09-20 12:44:03 api_server.py:496] args: Namespace(model='Qwen/Q-7B', "
            "revision=None, tokenizer_revision='v1.0')",
            "ValueError: No supported config format found in Qwen/Q-7B",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "$ HF_TOKEN=$MY_TOKEN vllm serve Qwen/Q-7B --revision main",
            "ValueError: No supported config format found in Qwen/Q-7B",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "$ vllm serve Qwen/Q-7B --revision main",
            "ValueError: No supported config format found in Qwen/Q-7B",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "HF_TOKEN is not set; skipping huggingface-cli login",
            '  -e HF_TOKEN="" \\',
            "ValueError: No supported config format found in Qwen/Q-7B",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "Token is valid (permission: read).",
            "ValueError: No supported config format found in meta-llama/Llama-3.1-8B",
        ],
        "gated_model",
        True,
    ),
    # the image: `python -m`'s words for a module it cannot import; vLLM's warning that
    # its compiled extension found no CUDA runtime library (its ops fail later as a
    # NameError)
    (
        [
            "/usr/bin/python3: Error while finding module specification for "
            "'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')",
            "vllm-0   0/1     CrashLoopBackOff   6 (41s ago)   7m12s",
        ],
        "other",
        True,
    ),
    (
        [
            "WARNING 06-14 03:22:10 _custom_ops.py:14] Failed to import from vllm._C with "
            "ImportError('libcudart.so.11.0: cannot open shared object file: No such file or "
            "directory')",
            "[rank0]: NameError: name 'vllm_ops' is not defined",
        ],
        "other",
        True,
    ),
    # the host: no home directory for the container's user; a process killed by SIGBUS
    # (shared memory too small) with nothing else printed
    (["RuntimeError: Could not determine home directory."], "other", False),
    # torch's rendezvous store warning that an address could not be bound, alone
    # (tests/diagnostics/classify/test_selection.py: a cause elsewhere beats it)
    (
        [
            "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use)."
        ],
        "other",
        False,
    ),
    # transformers' lazy import of its own module failing: the image's packages do not
    # load together (held-out set OB)
    (
        [
            "RuntimeError: Failed to import transformers.configuration_utils because of the "
            "following error (look up to see its traceback):",
            "module 'torch' has no attribute 'compiler'",
        ],
        "other",
        True,
    ),
    # the shell's job report of a killed process in another locale (held-out set OE)
    (
        [
            "INFO 05-16 18:02:47 weight_utils.py:199] Using model weights format ['*.bin']",
            "./start.sh: строка 5: 30521 Убито              python3 -m vllm.entrypoints."
            "openai.api_server --model /mnt/models/m --tensor-parallel-size 2",
        ],
        "other",
        False,
    ),
    (["run.sh: Zeile 3:  1234 Getötet                 vllm serve m"], "other", False),
    # vLLM's Ray executor: two nodes reporting one address (held-out set OD)
    (
        [
            "RuntimeError: Every node should have a unique IP address. Got 2 nodes with node "
            "ids ['7c4f', 'e2b4'] and 1 unique IP addresses {'10.0.0.5'}. Please check your "
            "network configuration. If you set `VLLM_HOST_IP` environment variable, make sure "
            "it is unique for each node."
        ],
        "bad_config",
        True,
    ),
    # a torch build without NCCL (Windows' wheels): the image lacks it (held-out set NV)
    (["RuntimeError: Distributed package doesn't have NCCL built in"], "other", True),
    (["c41e9b07d2aa Exited (135) 14 seconds ago"], "other", False),
    (["run.sh: line 3:  1234 Bus error               (core dumped) vllm serve m"], "other", False),
    # a runner's or the shell's report that the command ended: killed (137) or with an
    # error (tests/diagnostics/classify/test_exit_reports.py has their other words)
    (["make: *** [Makefile:12: serve] Error 137"], "other", False),
    (["Error: Process completed with exit code 1."], "other", False),
    (["❯ echo $?", "137"], "other", False),
    (["$ echo $?", "1"], "other", False),
    # a temporary status without the hub's URL is anyone's (a web UI's proxy in front of
    # a vLLM that did not start): the cause the log names wins; alone, the network
    (
        [
            "Credentials validation failed with status code 502",
            "ValueError: Model architectures ['Gemma2ForCausalLM'] are not supported for now.",
        ],
        "model_requirement",
        True,
    ),
    (["urllib.error.HTTPError: HTTP Error 503: Service Unavailable"], "network", False),
    # a log tailer's pod and container names before vLLM's own lines (stern)
    (
        [
            "decode-0 vllm (EngineCore_DP0 pid=175) ERROR 01-29 12:05:49 [core.py:866] "
            "RuntimeError: NIXL is not available"
        ],
        "other",
        True,
    ),
    (["RuntimeError: CUDA is not available"], "cuda_fault", False),
    # A compute-capability threshold written as a comparison, also on an ImportError (vLLM
    # 0.4's punica kernels, whose missing module it is raised from): the GPU, not the image.
    (
        [
            "ModuleNotFoundError: No module named 'vllm._punica_C'",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "ImportError: punica LoRA kernels require compute capability >= 8.0",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: torchao FP8 activation quantization config 'Float8DynamicActivationFloat8WeightConfig' requires GPU compute capability >= 8.9",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-65a1b2c3-0123456789abcdef01234567)",
            "",
            "Repository Not Found for url: https://huggingface.co/meta-llama/Llama-2-7b-hf/resolve/main/config.json.",
            "Please make sure you specified the correct `repo_id` and `repo_type`.",
            "If you are trying to access a private or gated repo, make sure you are authenticated.",
            "Invalid username or password.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-6)",
            "",
            "Repository Not Found for url: https://huggingface.co/foo/bar/resolve/main/config.json.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "Repository Not Found for url: https://huggingface.co/api/models/foo/bar/revision/main.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/meta-llama/Llama-2-7b-chat-hf/resolve/main/config.json",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-65)",
            "",
            "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b-hf/resolve/main/config.json.",
            "Repo model meta-llama/Llama-2-7b-hf is gated. You must be authenticated to access it.",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "Cannot access gated repo for url https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.2/resolve/main/config.json.",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.GatedRepoError: 403 Client Error. (Request ID: Root=1-6)",
            "",
            "Cannot access gated repo for url https://huggingface.co/meta-llama/Meta-Llama-3-8B/resolve/main/config.json.",
            "Access to model meta-llama/Meta-Llama-3-8B is restricted and you are not in the authorized list. Visit https://huggingface.co/meta-llama/Meta-Llama-3-8B to ask for access.",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "OSError: You are trying to access a gated repo.",
            "Make sure to request access at https://huggingface.co/meta-llama/Llama-2-7b-hf and pass a token having permission to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`.",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "OSError: meta-llama/Llama-2-7b-hf is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
            "If this is a private repository, make sure to pass a token having permission to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.LocalEntryNotFoundError: Connection error, and we cannot find the requested files in the disk cache. Please try again or make sure your Internet connection is on.",
        ],
        "network",
        False,
    ),
    (
        [
            "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like facebook/opt-125m is not the path to a directory containing a file named config.json.",
            "Checkout your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.",
        ],
        "network",
        False,
    ),
    (
        [
            "huggingface_hub.utils._errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.",
        ],
        "network",
        False,
    ),
    (
        [
            "OSError: We have no connection or you passed local_files_only, so force_download is not an accepted option.",
        ],
        "network",
        False,
    ),
    (
        [
            "OSError: facebook/opt-125m does not appear to have a file named config.json. Checkout 'https://huggingface.co/facebook/opt-125m/main' for available files.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /facebook/opt-125m/resolve/main/config.json (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution'))\"), '(Request ID: 1)')",
        ],
        "network",
        False,
    ),
    # huggingface_hub 1.x's client is httpx: its transport errors by name (held-out NX)
    (
        [
            "httpcore.RemoteProtocolError: peer closed connection without sending complete "
            "message body (received 1873772544 bytes, expected 4965799096)"
        ],
        "network",
        False,
    ),
    (["httpx.ReadError: [Errno 104] Connection reset by peer"], "network", False),
    (
        [
            "requests.exceptions.ReadTimeout: (ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)\"), '(Request ID: 2)')",
        ],
        "network",
        False,
    ),
    (
        [
            "huggingface_hub.utils._errors.HfHubHTTPError: 504 Server Error: Gateway Time-out for url: https://huggingface.co/api/models/foo/bar",
        ],
        "network",
        False,
    ),
    (
        [
            "huggingface_hub.utils._errors.RevisionNotFoundError: 404 Client Error. (Request ID: Root=1)",
            "",
            "Revision Not Found for url: https://huggingface.co/api/models/foo/bar/revision/v2.",
            "Invalid rev id: v2",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "huggingface_hub.utils._errors.EntryNotFoundError: 404 Client Error. (Request ID: Root=1)",
            "",
            "Entry Not Found for url: https://huggingface.co/foo/bar/resolve/main/config.json.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "huggingface_hub.utils._validators.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/llama/'. Use `repo_type` argument if needed.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "KeyError: 'mistral'",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            '  File "/usr/local/lib/python3.10/dist-packages/transformers/models/auto/configuration_auto.py", line 710, in __getitem__',
            "    raise KeyError(key)",
            "KeyError: 'mixtral'",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: The checkpoint you are trying to load has model type `qwen2` but Transformers does not recognize this architecture. This could be because of an issue with the checkpoint, or because your version of Transformers is out of date.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Loading Qwen/Qwen-7B-Chat requires you to execute the configuration file in that repo on your local machine. Make sure you have read the code there to avoid malicious use, then set the option `trust_remote_code=True` to remove this error.",
        ],
        "remote_code",
        True,
    ),
    # a class no transformers release ships: the repository's own code (baichuan-inc's
    # tokenization_baichuan.py)
    (
        [
            "ValueError: Tokenizer class BaichuanTokenizer does not exist or is not currently imported.",
        ],
        "remote_code",
        True,
    ),
    # torch's older out-of-memory wording (to 2.0): what PyTorch reserved in this process
    # against the total and the free; the rest held by another process is transient
    *(
        (
            [
                "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 86.00 MiB "
                f"(GPU 0; 23.69 GiB total capacity; {allocated} already allocated; 9.06 MiB free; "
                f"{reserved} reserved in total by PyTorch) If reserved memory is >> allocated "
                "memory try setting max_split_size_mb to avoid fragmentation.",
            ],
            "oom",
            permanent,
        )
        for allocated, reserved, permanent in (
            ("3.12 GiB", "3.20 GiB", False),
            ("22.31 GiB", "22.85 GiB", True),
        )
    ),
    # transformers' GGUF reader, called from vLLM's config code (whose frames the
    # traceback passes on its way in): the GGUF file needs another transformers
    *(
        (
            [
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.10/dist-packages/vllm/config.py", line 171, in __init__',
                "    self.hf_config = get_config(self.model, trust_remote_code, revision,",
                '  File "/usr/local/lib/python3.10/dist-packages/transformers/modeling_gguf_pytorch_utils.py", line 106, in load_gguf_checkpoint',
                f"    raise ValueError({raised})",
                f"ValueError: {message}",
            ],
            "model_requirement",
            True,
        )
        for raised, message in (
            (
                'f"Architecture {architecture} not supported"',
                "Architecture deepseek2 not supported",
            ),
            (
                'f"GGUF model with architecture {architecture} is not supported yet."',
                "GGUF model with architecture minimax is not supported yet.",
            ),
        )
    ),
    (
        [
            "ValueError: Unrecognized model in /models/foo. Should have a `model_type` key in its config.json, or contain one of the following strings in its name: albert, bart",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "ValueError: `rope_scaling` must be a dictionary with with two fields, `type` and `factor`, got {'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192, 'rope_type': 'llama3'}",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB (GPU 0; 22.19 GiB total capacity; 21.31 GiB already allocated; 117.50 MiB free; 21.37 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
        ],
        "oom",
        True,
    ),
    (
        [
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; 13.20 GiB already allocated; 1.47 GiB free; 13.22 GiB reserved in total by PyTorch)",
        ],
        "oom",
        True,
    ),
    (
        [
            "RuntimeError: CUDA error: out of memory",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
        ],
        "oom",
        True,
    ),
    (
        [
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        ],
        "oom",
        True,
    ),
    (
        [
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1251, unhandled cuda error, NCCL version 2.14.3",
            "ncclUnhandledCudaError: Call to CUDA function failed.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
        ],
        "cuda_fault",
        False,
    ),
    # NCCL's result string alone or as its bytes, under a wrapper that adds nothing
    # (held-out AII): the string is NCCL's own, read wherever it is printed.
    (
        [
            "(RayWorkerVllm pid=31875) ERROR 04-08 14:22:46 ray_utils.py:44] RuntimeError: b'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'",
        ],
        "cuda_fault",
        False,
    ),
    (["RuntimeError: remote process exited or there was a network error"], "cuda_fault", False),
    (
        [
            "RuntimeError: NCCL Error 1: unhandled cuda error",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "[Mon Jan  8 10:00:00 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: CUDA error: device-side assert triggered",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: No CUDA GPUs are available",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: RayWorkerVllm",
            "\tactor_id: 1a2b3c",
            "\tpid: 1234",
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.",
        ],
        "other",
        False,
    ),
    (
        [
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "Memory on the node (IP: 10.0.0.1, ID: abc) where the task (actor ID: def, name=RayWorkerVllm.__init__, pid=1234) was running was 30.5GB / 31.2GB (0.97), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 123) because it was the most recently scheduled task.",
        ],
        "oom",
        True,
    ),
    (
        [
            "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ff Worker ID: aa Node ID: bb Worker IP address: 10.0.0.1 Worker port: 1 Worker PID: 2 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.",
        ],
        "other",
        False,
    ),
    (
        [
            "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism",
        ],
        "oom",
        True,
    ),
    (
        [
            "INFO 01-10 12:00:00 llm_engine.py:70] Initializing an LLM engine with config: model='mistralai/Mistral-7B-v0.1'",
            "Killed",
        ],
        "other",
        False,
    ),
    (
        [
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (13824). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        ],
        "kv_cache",
        True,
    ),
    (
        [
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ],
        "kv_cache",
        True,
    ),
    (
        [
            "ValueError: User-specified max_model_len (32768) is greater than the derived max_model_len (max_position_embeddings=4096 or model_max_length=None in model's config.json). This may lead to incorrect model outputs or CUDA errors. Make sure the value is correct and within the model context size.",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Model architectures ['QWenLMHeadModel'] are not supported for now. Supported architectures: ['AquilaModel', 'BaiChuanForCausalLM', 'LlamaForCausalLM']",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Quantization method specified in the model config (gptq) does not match the quantization method specified in the `quantization` argument (awq).",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: The quantization method awq is not supported for the current GPU. Minimum capability: 75. Current capability: 70.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current capability: 75.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Total number of hidden layers (30) must be divisible by pipeline parallel size (4).",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Unknown quantization method: gguf. Must be one of ['awq', 'gptq', 'squeezellm'].",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: awq quantization is currently not supported in ROCm.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Unknown dtype: bfloat32",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Ray is not installed. Please install Ray to use distributed serving.",
        ],
        "other",
        True,  # a package the image lacks: every restart fails the same way
    ),
    (
        [
            "usage: api_server.py [-h] [--host HOST] [--port PORT] [--model MODEL]",
            "api_server.py: error: unrecognized arguments: --max-num-batched-tokens-foo 4096",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "usage: vllm serve [-h] [--model MODEL]",
            "vllm serve: error: argument --dtype: invalid choice: 'fp8' (choose from 'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "api_server.py: error: argument --quantization/-q: invalid choice: 'gguf' (choose from 'awq', 'gptq', 'squeezellm', None)",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "api_server.py: error: argument --max-model-len: invalid int value: '8k'",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ERROR 11-29 17:20:00 [core.py:708] EngineCore failed to start.",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ],
        "other",
        False,
    ),
    (
        [
            '  File "/usr/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 120, in __init__',
            "    self._init_cache()",
            '  File "/usr/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 200, in _init_cache',
        ],
        # Judged by the innermost frame (every catalogued raise site of _init_cache is a
        # KV-cache one); transient: where a paste stops need not be where it was raised.
        "kv_cache",
        False,
    ),
    (
        [
            "...",
            '  File "/x/vllm/worker/worker.py", line 1, in f',
            "    raise RuntimeError(",
            "[truncated]",
        ],
        "other",
        False,
    ),
    (
        [
            "SystemExit: 1",
        ],
        "other",
        False,
    ),
    (
        [
            "AssertionError",
        ],
        "other",
        False,
    ),
    (
        [
            "ZeroDivisionError: division by zero",
        ],
        "other",
        False,
    ),
    (
        [
            '  File "/x/vllm/worker/worker.py", line 1, in f',
            "    self.model_runner.load_model()",
            "                     ^^^^^^^^^^^^^^^^^^^^^",
        ],
        "other",
        False,
    ),
    (
        [
            "OSError: Can't load tokenizer for 'foo/bar'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the "
            "same name. Otherwise, make sure 'foo/bar' is the correct path to a directory "
            "containing all relevant files for a LlamaTokenizerFast tokenizer.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "OSError: Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, "
            "model.ckpt.index or flax_model.msgpack found in directory /models/x.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "RuntimeError: Data processing error: CAS service error : Reqwest Error: HTTP status "
            "server error (503 Service Unavailable), domain: https://cas-server.xethub.hf.co/x",
        ],
        "network",
        False,
    ),
    (
        [
            "RuntimeError: Failed to load the model config. If the model is a custom model not "
            "yet available in the HuggingFace transformers library, consider setting "
            "`trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI.",
        ],
        "remote_code",
        True,
    ),
    (
        ["vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already."],
        "other",
        False,
    ),
    # processes that died: container exits (137, SIGKILL: no cause printed), the kernel's
    # OOM killer named, crashes on a signal
    (["vllm-1 exited with code 137"], "other", False),
    (
        ["  Last State:     Terminated", "    Reason:       OOMKilled", "    Exit Code:    137"],
        "oom",
        True,
    ),
    (
        [
            "[12345.678] Out of memory: Killed process 1234 (python3) total-vm:123456kB, anon-rss:1kB"
        ],
        "oom",
        True,
    ),
    (["Segmentation fault (core dumped)"], "other", False),
    (["Fatal Python error: Segmentation fault"], "other", False),
    (["*** SIGSEGV received at time=1700000000 on cpu 3 ***"], "other", False),
    (["terminate called after throwing an instance of 'std::runtime_error'"], "other", False),
    (["terminate called without an active exception"], "other", False),
    # native code's fatal log line (glog, as Ray and gRPC print it): the process aborts
    (
        ["F0605 12:33:07.123456  1234 node_manager.cc:100] Check failed: status.ok()"],
        "other",
        False,
    ),
    (
        ["[2024-06-05 12:33:07,123 F 1234 5678] core_worker.cc:123: Check failed: ok"],
        "other",
        False,
    ),
    # a log that ends after native code's error line (glog's E level) failed
    (
        [
            "INFO 06-05 12:31:20 llm_engine.py:161] Initializing an LLM engine (v0.4.3)",
            "E0605 12:33:07.123456  1234 gcs_client.cc:100] Failed to connect to GCS within 60 s",
        ],
        "other",
        False,
    ),
    (
        [
            "INFO 06-05 12:31:20 llm_engine.py:161] Initializing an LLM engine (v0.4.3)",
            # (the driver's own process: a Ray daemon's forwarded line is Ray's, test_not_vllms)
            "[2024-06-05 12:33:07,123 E 1234 5678] core_worker.cc:123: Check failed",
        ],
        "other",
        False,
    ),
    (
        [
            "terminate called after throwing an instance of 'c10::Error'",
            "  what():  CUDA error: an illegal memory access was encountered",
        ],
        "cuda_fault",
        False,
    ),
    # the host's GPU and driver
    (["NVRM: GPU at PCI:0000:3b:00: GPU-abc has fallen off the bus."], "cuda_fault", False),
    (
        ["Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"],
        "cuda_fault",
        False,
    ),
    (
        [
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
            "sure that the latest NVIDIA driver is installed and running."
        ],
        "cuda_fault",
        False,
    ),
    (["RuntimeError: NCCL communicator was aborted on rank 0."], "cuda_fault", False),
    (["Failed to initialize NVML: Driver/library version mismatch"], "cuda_fault", False),
    # transformers without a mapping for the model's config class; tokenizers reading a
    # newer tokenizer.json (transformers 4.34 on; tokenizers 0.13 on)
    (
        [
            "ValueError: Unrecognized configuration class <class 'transformers_modules.x.configuration_x.XConfig'> to build an AutoTokenizer.",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "ValueError: Unrecognized configuration class <class 'transformers.models.qwen3.configuration_qwen3.Qwen3Config'> for this kind of AutoModel: AutoModelForVision2Seq.",
        ],
        "model_requirement",
        True,
    ),
    # the image's tokenizers too old for the model's tokenizer.json: the image's (stop 62)
    (
        [
            "Exception: data did not match any variant of untagged enum ModelWrapper at line 268080 column 3",
        ],
        "other",
        True,
    ),
    # a config field the model's config class lacks (a paste without its frames)
    (
        ["AttributeError: 'Qwen2Config' object has no attribute 'rope_theta'"],
        "model_requirement",
        True,
    ),
    # a local model folder without its config (transformers and vLLM's mistral format)
    (
        [
            "FileNotFoundError: [Errno 2] No such file or directory: '/runpod-volume/models/llama/config.json'"
        ],
        "model_not_found",
        True,
    ),
    # a checkpoint in another layout than vLLM's implementation of its architecture
    (["KeyError: 'model.layers.0.mlp.experts.0.w1.weight'"], "model_requirement", True),
    (["[rank0]: KeyError: 'transformer.h.0.attn.c_attn.qweight'"], "model_requirement", True),
    (
        [
            "ValueError: There is no module or parameter named 'model.visual.blocks.0.attn.qkv' in Qwen2_5_VLForConditionalGeneration"
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "AssertionError: Attempted to load weight (torch.Size([4096, 1024])) into parameter (torch.Size([4096, 4096]))"
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:",
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32002, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
        ],
        "model_requirement",
        True,
    ),
    # vLLM's memory-profiling assertion: free memory grew while it profiled (another
    # process released GPU memory): vLLM 0.5 (bytes), 0.6-0.10 (GiB), V1 (its own hint).
    (
        [
            "AssertionError: Error in memory profiling. Initial free memory 21474836480, current free memory 22474836480. This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.",
        ],
        "oom",
        False,
    ),
    (
        [
            "AssertionError: Error in memory profiling. Initial free memory 20.1 GiB, current free memory 22.3 GiB. This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.",
        ],
        "oom",
        False,
    ),
    (
        [
            "(EngineCore_DP0 pid=12) ERROR 01-01 00:00:00 [core.py:1] AssertionError: Error in memory profiling. Initial free memory 70.2 GiB, current free memory 75.5 GiB. This happens when other processes sharing the same container release GPU memory while vLLM is profiling during initialization. To fix this, ensure consistent GPU memory allocation or isolate vLLM in its own container.",
        ],
        "oom",
        False,
    ),
    # One line kept alone from a longer message (the shapes of the held-out sets' "line"
    # variant): the hub's own refusal under its status, the resolver's exception with its
    # message cut, hf_transfer's client error, the raylet's memory monitor, a pydantic
    # detail line without its indent, a compiler missing a header the image lacks, and
    # torch seeing no GPU after cudaErrorUnknown.
    (
        [
            "Repo model meta-llama/Llama-2-7b-chat-hf is gated. You must be authenticated to access it."
        ],
        "gated_model",
        True,
    ),
    (
        [
            "Your request to access model meta-llama/Llama-3.2-3B-Instruct is awaiting a review from the repo authors."
        ],
        "gated_model",
        True,
    ),
    (["socket.gaierror: [Errno -3] Temporary failure in name reso"], "network", False),
    (
        [
            "Exception: Failed too many failures in parallel (3): Request: error sending request for url (https://cdn-lfs-us-1.hf.co/repos/8e/21/abc)"
        ],
        "network",
        False,
    ),
    (
        [
            "(raylet) [2024-06-11 08:01:42,018 E 9211 9211] (raylet) node_manager.cc:3065: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 5e0c3a91)"
        ],
        "oom",
        True,
    ),
    (
        [
            "Input should be less than or equal to 1 [type=less_than_equal, input_value=90.0, input_type=float]"
        ],
        "bad_config",
        True,
    ),
    (
        ["/tmp/tmpq3v8w1zk/main.c:5:10: fatal error: Python.h: No such file or directory"],
        "other",
        True,
    ),
    (
        [
            "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero."
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)"
        ],
        "cuda_fault",
        False,
    ),
    # The shell's and the runtime's words in a paste indented as a whole (a Markdown code
    # block): anchored at the line's start, after the indent.
    (["    INFO 05-01 10:00:00 [loader.py:1] Loading weights", "    Killed"], "other", False),
    (["    exec /usr/bin/python3: exec format error"], "other", True),
    # Out of memory while setting up CUDA on the GPU (torch's set_device, before vLLM
    # allocates anything): other processes hold the GPU's memory, transient.
    (
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 80, in init_model',
            "    torch.cuda.set_device(self.device)",
            '  File "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 404, in set_device',
            "    torch._C._cuda_setDevice(device)",
            "RuntimeError: CUDA error: out of memory",
        ],
        "oom",
        False,
    ),
    # transformers' wrapper of an HTTP error while it loads a file: the status under it
    # decides; alone, a connection's fault.
    (
        [
            "OSError: There was a specific connection error when trying to load meta-llama/Llama-3.1-8B-Instruct:",
            "401 Client Error: Unauthorized for url: https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json",
            "Invalid credentials in Authorization header",
        ],
        "gated_model",
        True,
    ),
    (
        ["OSError: There was a specific connection error when trying to load org/model:"],
        "network",
        False,
    ),
    # A chat template path the user gave that does not exist (vLLM 0.5+'s wording).
    (
        [
            "ValueError: The supplied chat template string (./template_chatml.jinja) appears path-like, but doesn't exist!"
        ],
        "bad_config",
        True,
    ),
    # Triton's FP8 matrix multiply on a GPU below Ada/Hopper.
    (
        ["AssertionError: Dot op does not support fp8e4nv on CUDA arch < 90"],
        "model_requirement",
        True,
    ),
    # NCCL's warnings that the group cannot form: no interface for its bootstrap, an
    # InfiniBand completion with an error status.
    (
        ["gpu-a02:2207:2207 [0] bootstrap.cc:75 NCCL WARN Bootstrap : no socket interface found"],
        "cuda_fault",
        False,
    ),
    # A tokenizer class no library ships lacks an attribute its code reads: the
    # repository's own tokenizer on another transformers, pasted as the line alone
    # (held-out AMV, AMX); transformers' and vLLM's own classes stay an exception as any.
    (
        ["AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'"],
        "remote_code",
        True,
    ),
    (
        ["baichuan  | AttributeError: 'BaichuanTokenizer' object has no attribute 'sp_model'"],
        "remote_code",
        True,
    ),
    (
        [
            "AttributeError: 'CachedQwen2TokenizerFast' object has no attribute "
            "'all_special_tokens_extended'"
        ],
        "other",
        False,
    ),
    (["AttributeError: 'MistralTokenizer' object has no attribute 'vocab'"], "other", False),
    # a FUSE mount whose daemon is gone (held-out ANL: gcsfuse behind the model's path)
    (
        ["OSError: [Errno 107] Transport endpoint is not connected: '/data/models/gemma-2-9b-it'"],
        "other",
        False,
    ),
    # numpy's warning that an extension built against NumPy 1.x is imported under 2.x:
    # the image's packages (held-out ANA, the line alone)
    (["A module that was compiled using NumPy 1.x cannot be run in"], "other", True),
    # V0's profile: what is left for the KV cache is negative (held-out ANE, alone)
    (
        [
            "INFO 02-10 16:47:31 worker.py:266] model weights take 14.25GiB; non_torch_memory "
            "takes 0.16GiB; PyTorch activation peak memory takes 4.35GiB; the rest of the "
            "memory reserved for KV Cache is -1.03GiB."
        ],
        "kv_cache",
        True,
    ),
    # NCCL's shared-memory segment in /dev/shm, pasted without its WARN header
    (
        ["Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)"],
        "cuda_fault",
        False,
    ),
    (
        ["failed to extend /dev/shm/nccl-Xq2mLb to 9637892 bytes"],
        "cuda_fault",
        False,
    ),
    (
        [
            "vllm-r1-0-1:588:1290 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.244.2.9<43561> with status=12 opcode=129 len=0 vendor err 129 (Recv)"
        ],
        "cuda_fault",
        False,
    ),
    # Kubernetes' service link for a Service named vllm (VLLM_PORT=tcp://ip:port), alone.
    (
        ["ValueError: invalid literal for int() with base 10: 'tcp://10.96.142.7:8000'"],
        "bad_config",
        True,
    ),
    # The most common requirement's message cut right after "are not" (a terminal's width).
    (
        ["ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] are not"],
        "model_requirement",
        True,
    ),
    # A catalogued message whose parts the paste joined with two spaces.
    (
        [
            "ValueError: Weight output_size_per_partition = 7392 is not divisible by  min_thread_n = 64. Consider reducing tensor_parallel_size or running with --quantization gptq."
        ],
        "bad_config",
        True,
    ),
    (
        [
            "TypeError: Error: --enable-auto-tool-choice requires tool_parser:'llama3' which has not been registered"
        ],
        "bad_config",
        True,
    ),
    # A tokenizer class of transformers missing from an older one: the model needs a newer
    # transformers (a class no release ships is the repository's own: remote_code).
    (
        ["ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported."],
        "model_requirement",
        True,
    ),
    # A value the user chose, rejected where the catalogue's scope does not reach (the
    # tool and reasoning parsers' registries, the API server's middleware, LoRA's limits).
    (["KeyError: \"tool helper: 'llama3' not found in tool_parsers\""], "bad_config", True),
    (
        [
            "(APIServer pid=1) ValueError: Invalid middleware auth_mw.check_api_key. Must be a function or a class."
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ERROR 06-12 17:41:21 [core.py:494] ValueError: LoRA rank 64 is greater than max_lora_rank 16."
        ],
        "bad_config",
        True,
    ),
    # The API server's TLS files, loaded as it starts listening (after it says it starts).
    (
        [
            "INFO 04-22 12:32:03 [api_server.py:1081] Starting vLLM API server on https://0.0.0.0:8443",
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/vllm", line 10, in <module>',
            '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/config.py", line 119, in create_ssl_context',
            "    ctx.load_cert_chain(certfile, keyfile, get_password)",
            "FileNotFoundError: [Errno 2] No such file or directory",
        ],
        "bad_config",
        True,
    ),
    # What the image's packages lack: a module without the attribute its caller expects
    # (another version; a torch built without CUDA), a package refusing the installed torch.
    (["AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'"], "other", True),
    (
        [
            "AttributeError: module 'transformers' has no attribute 'Qwen2VLForConditionalGeneration'"
        ],
        "other",
        True,
    ),
    (
        [
            "ERROR! Intel® Extension for PyTorch* needs to work with PyTorch 2.3.*, but PyTorch 2.5.1+cxx11.abi is found. Please switch to the matching version and run again."
        ],
        "other",
        True,
    ),
    # vLLM's KV-cache message reflowed by a Markdown quote and cut inside the estimate it
    # appends ("Based on the available memory, ..."): that sentence is the KV cache's.
    (
        [
            "> ValueError: To serve at least one request with the models's max seq len",
            "> (10485760), (120.42 GiB KV cache is needed, which is larger than the available",
            "> KV cache memory (14.47 GiB). Based on the available memory, the estimated",
            "> maximum model length is 12",
        ],
        "kv_cache",
        True,
    ),
    # vLLM run on macOS: no GPU platform, a requirement of the host (as native Windows).
    (
        [
            "Traceback (most recent call last):",
            '  File "/Users/me/src/vllm/vllm/engine/arg_utils.py", line 903, in create_engine_config',
            '  File "/Users/me/src/vllm/vllm/config.py", line 1154, in __init__',
            '    raise RuntimeError("Failed to infer device type")',
            "RuntimeError: Failed to infer device type",
        ],
        "model_requirement",
        True,
    ),
    # A model repository's own code written for another transformers or torch: the name
    # it imports or uses is not in the image's version (remote_code, permanent); the
    # same import failing in vLLM's own code is the image's (other, permanent).
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/transformers/dynamic_module_utils.py", line 311, in get_class_in_module',
            "    module_spec.loader.exec_module(module)",
            '  File "/root/.cache/huggingface/modules/transformers_modules/org/m/3a9c/modeling_m.py", line 34, in <module>',
            "    from transformers.utils import (",
            "ImportError: cannot import name 'is_flash_attn_greater_or_equal_2_10' from 'transformers.utils' (/usr/local/lib/python3.12/dist-packages/transformers/utils/__init__.py)",
        ],
        "remote_code",
        True,
    ),
    (
        [
            "Traceback (most recent call last):",
            '  File "/home/u/.cache/huggingface/modules/transformers_modules/org/m/3a9c/modeling_m.py", line 88, in __init__',
            "    self.dtype = torch.float8_e4m3fn",
            "AttributeError: module 'torch' has no attribute 'float8_e4m3fn'",
        ],
        "remote_code",
        True,
    ),
    # ... and a library it calls rejecting the call (an API that changed): raised in the
    # library, under the repository's frame (remote_code); the same error without that
    # frame is not the repository's.
    (
        [
            "Traceback (most recent call last):",
            '  File "/root/.cache/huggingface/modules/transformers_modules/THUDM/chatglm3-6b/a5ba/tokenization_chatglm.py", line 109, in __init__',
            "    super().__init__(padding_side=padding_side, **kwargs)",
            '  File "/usr/local/lib/python3.10/dist-packages/transformers/tokenization_utils_base.py", line 861, in __init__',
            "    setattr(self, key, value)",
            "AttributeError: can't set attribute 'eos_token'",
        ],
        "remote_code",
        True,
    ),
    (
        [
            "Traceback (most recent call last):",
            '  File "/root/.cache/huggingface/modules/transformers_modules/org/m/3a9c/modeling_m.py", line 120, in forward',
            "    out = self.rotary(q, k, seq_len=seq_len)",
            '  File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1751, in _call_impl',
            "    return forward_call(*args, **kwargs)",
            "TypeError: LlamaRotaryEmbedding.forward() got an unexpected keyword argument 'seq_len'",
        ],
        "remote_code",
        True,
    ),
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/transformers_utils/config.py", line 5, in <module>',
            "    from transformers import GenerationConfig, PretrainedConfig",
            "ImportError: cannot import name 'GenerationConfig' from 'transformers' (/usr/local/lib/python3.10/dist-packages/transformers/__init__.py)",
        ],
        "other",
        True,
    ),
    # A JIT's own search for the CUDA toolkit (FlashInfer's, at the sampler's warm-up):
    # the image lacks the compiler, every restart the same.
    (
        [
            '(EngineCore_DP0 pid=4) ERROR 10-24 12:11:52 [core.py:708]   File "/venv/lib/python3.12/site-packages/flashinfer/jit/cpp_ext.py", line 60, in get_cuda_path',
            "(EngineCore_DP0 pid=4) ERROR 10-24 12:11:52 [core.py:708] RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
        ],
        "other",
        True,
    ),
    (
        ["RuntimeError: Cannot find CUDA_HOME. CUDA must be available to build the kernels."],
        "other",
        True,
    ),
    # transformers' check of a model repository's own code: packages it imports that the
    # image lacks; the repository's code cannot load, every restart the same
    (
        [
            '  File "/usr/local/lib/python3.10/dist-packages/transformers/dynamic_module_utils.py", line 180, in check_imports',
            "    raise ImportError(",
            "ImportError: This modeling file requires the following packages that were not found in your environment: tiktoken. Run `pip install tiktoken`",
        ],
        "remote_code",
        True,
    ),
    # uvicorn's TLS set-up: a key that is not its certificate's is the options' value,
    # not the network's SSL
    (
        [
            '  File "/usr/local/lib/python3.12/dist-packages/uvicorn/config.py", line 115, in create_ssl_context',
            "    ctx.load_cert_chain(certfile, keyfile, get_password)",
            "ssl.SSLError: [X509: KEY_VALUES_MISMATCH] key values mismatch (_ssl.c:4011)",
        ],
        "bad_config",
        True,
    ),
    # an installed plugin that failed to load (vllm/plugins/__init__.py logs it and goes
    # on): what it registers is missing after; its own error decides, and alone the
    # failure to load it does
    (
        [
            "ERROR 03-06 08:14:22 __init__.py:46] Failed to load plugin acme_models",
            "ERROR 03-06 08:14:22 __init__.py:46] Traceback (most recent call last):",
            "ERROR 03-06 08:14:22 __init__.py:46] ModuleNotFoundError: No module named 'acme_kernels'",
            "ValueError: Model architectures ['AcmeForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']",
        ],
        "other",
        True,
    ),
    (
        [
            "ERROR 03-06 08:14:22 __init__.py:46] Failed to load plugin acme_models",
            "ValueError: Model architectures ['AcmeForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']",
        ],
        "other",
        True,
    ),
    # a parser plugin given as a file whose import lacked a package (the image lacks it):
    # the parser's name refused after it is its consequence (held-out GS, AAB, KQ, AAZ);
    # a plugin file that is not there leaves the option rejected
    *(
        (
            [
                "ERROR 04-24 18:30:55 [abstract_tool_parser.py:159] Failed to load module "
                "'glm4_tool_parser' from /workspace/parsers/glm4_tool_parser.py.",
                f"ERROR 04-24 18:30:55 [abstract_tool_parser.py:159] {error}",
                "KeyError: 'invalid tool call parser: glm4 (chose from { hermes,mistral })'",
            ],
            category,
            True,
        )
        for error, category in (
            ("ModuleNotFoundError: No module named 'json_repair'", "other"),
            (
                "FileNotFoundError: [Errno 2] No such file or directory: "
                "'/workspace/parsers/glm4_tool_parser.py'",
                "bad_config",
            ),
        )
    ),
    # the CUDA graph mode chosen, refused for the attention backend, however the message's
    # tail reads (held-out AAZ: "(support:X);" where vLLM prints "(support:X) ;")
    (
        [
            "ValueError: CUDAGraphMode.FULL is not supported with FlexAttentionMetadataBuilder "
            "backend (support:AttentionCGSupport.NEVER); please try cudagraph_mode=PIECEWISE"
        ],
        "bad_config",
        True,
    ),
    # huggingface_hub's file system (HfFileSystem, which vLLM lists weights with)
    # re-raising the hub's answers as FileNotFoundError: a repo it does not show, a path
    # that is no repo id (a local folder missing on this node)
    (
        [
            '  File "/opt/conda/lib/python3.11/site-packages/huggingface_hub/hf_file_system.py", line 1005, in _raise_file_not_found',
            "    raise FileNotFoundError(msg) from err",
            "FileNotFoundError: mnt/models/Qwen2.5-72B-Instruct (repository not found)",
        ],
        "model_not_found",
        True,
    ),
    (
        ["FileNotFoundError: /mnt/models/Qwen2.5-72B-Instruct (invalid repository id)"],
        "model_not_found",
        True,
    ),
    # ModelScope's hub (VLLM_USE_MODELSCOPE), in its client's words (modelscope/hub/
    # errors.py): its 404 and its 403; the 403 without a token says the model "may not
    # exist", so a 404 with it decides.
    (
        [
            "requests.exceptions.HTTPError: The request model: qwen/Qwen2-7B-Instrcut does not exist!"
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "2024-08-12 16:20:31,402 - modelscope - ERROR - Authentication token does not exist, failed to access model Qwen/X which may not exist or may be private. Please login first.",
            "requests.exceptions.HTTPError: The request model: Qwen/X does not exist!",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "requests.exceptions.HTTPError: The authentication token is invalid, failed to access model org/private-model."
        ],
        "gated_model",
        True,
    ),
    # Object storage in botocore's words: credentials refused, no such bucket, not reached.
    (
        [
            "botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the ListObjectsV2 operation: Access Denied"
        ],
        "gated_model",
        True,
    ),
    (
        ["botocore.exceptions.NoCredentialsError: Unable to locate credentials"],
        "gated_model",
        True,
    ),
    # Google Cloud Storage's and Azure Blob Storage's clients, as KServe's storage
    # initializer prints them (held-out set NL)
    (
        [
            "google.api_core.exceptions.Forbidden: 403 GET https://storage.googleapis.com/storage/v1/b/models/o?prefix=mistral%2F: sa@p.iam.gserviceaccount.com does not have storage.objects.list access"
        ],
        "gated_model",
        True,
    ),
    (
        [
            "azure.core.exceptions.HttpResponseError: This request is not authorized to perform this operation using this permission.",
            "ErrorCode:AuthorizationPermissionMismatch",
        ],
        "gated_model",
        True,
    ),
    (
        [
            "google.api_core.exceptions.NotFound: 404 GET https://storage.googleapis.com/storage/v1/b/no-such-bucket/o?prefix=m%2F: The specified bucket does not exist."
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "azure.core.exceptions.ResourceNotFoundError: The specified container does not exist.",
            "ErrorCode:ContainerNotFound",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "botocore.errorfactory.NoSuchBucket: An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: The specified bucket does not exist"
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "urllib3.exceptions.NewConnectionError: <botocore.awsrequest.AWSHTTPConnection object at 0x7f41c8b2e3f0>: Failed to establish a new connection: [Errno 111] Connection refused",
            'botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: "http://minio:9000/models?list-type=2"',
        ],
        "network",
        False,
    ),
    (
        [
            "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPSConnection object at 0x7f0>: Failed to establish a new connection: [Errno 111] Connection refused"
        ],
        "network",
        False,
    ),
    # An address the start was given that is not a URL (HF_ENDPOINT without its scheme).
    (
        [
            "requests.exceptions.MissingSchema: Invalid URL 'hf-mirror.com/Qwen/Q/resolve/main/config.json': No scheme supplied. Perhaps you meant https://hf-mirror.com/Qwen/Q/resolve/main/config.json?"
        ],
        "bad_config",
        True,
    ),
    (
        ["httpx.UnsupportedProtocol: Request URL is missing an 'http://' or 'https://' protocol."],
        "bad_config",
        True,
    ),
    # DeepGEMM's search for nvcc, words between the verb and the compiler; its quote in
    # the traceback's source line is not the evidence.
    (
        [
            '  File "/usr/local/lib/python3.12/dist-packages/deep_gemm/jit/compiler.py", line 58, in get_nvcc_compiler',
            "    raise RuntimeError('Cannot find any available NVCC compiler')",
            "RuntimeError: Cannot find any available NVCC compiler",
        ],
        "other",
        True,
    ),
    (
        [
            'RuntimeError: Assertion error (csrc/jit/compiler.hpp:48): std::filesystem::exists(nvcc_path) and "Cannot find NVCC compiler: /usr/local/cuda/bin/nvcc"'
        ],
        "other",
        True,
    ),
    # Triton finding the driver's library only under versioned names: the image lacks
    # the name it looks for (a symlink), every restart the same.
    (
        [
            "AssertionError: libcuda.so cannot found!",
            "Possible files are located at ['/usr/lib/wsl/lib/libcuda.so.1'].Please create a symlink of libcuda.so to any of the files.",
        ],
        "other",
        True,
    ),
    (
        [
            "AssertionError: libcuda.so cannot found!",
            'Please make sure GPU is setup and then run "/sbin/ldconfig" (requires sudo) to refresh the linker cache.',
        ],
        "other",
        True,
    ),
    # argparse naming an option by its short form first, and any other error of vLLM's
    # own parser before it exits: what it was given is rejected.
    (
        [
            "usage: vllm serve <model_tag> [options]",
            "vllm serve: error: argument -O/--compilation-config: invalid from_cli value: '{level:3}'",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "usage: api_server.py [-h] [--host HOST] [--port PORT]",
            "api_server.py: error: Invalid value for --tensor-parallel-size",
        ],
        "bad_config",
        True,
    ),
    # Ray's client finding no cluster to join (RAY_ADDRESS, several nodes): its
    # ConnectionError is not the hub's network; another minute may bring the head up.
    (
        [
            '  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 1567, in init',
            "    bootstrap_address = services.canonicalize_bootstrap_address(address, _temp_dir)",
            "ConnectionError: Could not find any running Ray instance. Please specify the one to "
            "connect to by setting `--address` flag or `RAY_ADDRESS` environment variable.",
        ],
        "other",
        False,
    ),
    # A model's own code file missing from its folder (a copy of the weights and config
    # without the repository's .py files): remote_code; another missing file is not found.
    (
        [
            "OSError: /models/chatglm3-6b does not appear to have a file named "
            "configuration_chatglm.py. Checkout 'https://huggingface.co//models/chatglm3-6b/tree/None' "
            "for available files."
        ],
        "remote_code",
        True,
    ),
    (
        [
            "OSError: /models/llama does not appear to have a file named config.json. Checkout "
            "'https://huggingface.co//models/llama/tree/None' for available files."
        ],
        "model_not_found",
        True,
    ),
    # Kubernetes' report of the container killed for its memory limit, as JSON and as
    # kubectl get pods' table, after the start's last lines
    (
        [
            "Loading safetensors checkpoint shards:  47% Completed | 14/30 [01:52<02:09,  8.11s/it]",
            '{"terminated":{"containerID":"containerd://9f2c","exitCode":137,"finishedAt":'
            '"2024-05-14T10:23:45Z","reason":"OOMKilled","startedAt":"2024-05-14T10:21:02Z"}}',
        ],
        "oom",
        True,
    ),
    (
        [
            "NAME     READY   STATUS      RESTARTS      AGE",
            "vllm-0   0/1     OOMKilled   3 (41s ago)   5m12s",
        ],
        "oom",
        True,
    ),
    # An optimisation switched on that the model's sliding window (or the KV-cache dtype
    # chosen) excludes, the flag that resolves it named: flags contradicting the model.
    (
        [
            "NotImplementedError: Prefix caching is not supported with sliding window. Run "
            "with --disable-sliding-window to use prefix caching."
        ],
        "bad_config",
        True,
    ),
    (
        ["NotImplementedError: Sliding window is not allowed with prefix caching enabled!"],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Chunked prefill is not supported with sliding window. Set "
            "--disable-sliding-window to disable sliding window."
        ],
        "bad_config",
        True,
    ),
    # uvicorn's bind error (its startup, `logger.error(exc)` of the socket's OSError) after
    # the application started: the --host not an address of this machine, a port that
    # needs root (bad_config), or a port in use (another process: transient).
    (
        [
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 99] error while attempting to bind on address ('10.0.3.17', "
            "8000): cannot assign requested address",
            "INFO:     Waiting for application shutdown.",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): "
            "permission denied",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
            "address already in use",
        ],
        "other",
        False,
    ),
    # A Git LFS pointer file where the weights should be: torch.load reads its first
    # byte ("version ...") as a pickle opcode; a paste shows the pointer's text.
    (
        [
            '  File "/usr/lib/python3/dist-packages/torch/serialization.py", line 1040, in '
            "_legacy_load",
            "    magic_number = pickle_module.load(f, **pickle_load_args)",
            "_pickle.UnpicklingError: invalid load key, 'v'.",
        ],
        "other",
        True,
    ),
    # safetensors' unreadable header is generic structure (a truncated download, or a
    # file that is no safetensors): a pointer's text printed in the start (the user's
    # `head` of the file after the failure) decides; alone, the truncated download
    # (held-out sets IF and NR)
    (
        [
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
            "$ head -c 200 /models/llama/model-00001-of-00002.safetensors",
            "version https://git-lfs.github.com/spec/v1",
        ],
        "other",
        True,
    ),
    (
        ["safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge"],
        "network",
        False,
    ),
    # ... and so does a git clone of the model's repository from the hub before it
    # (git fetches the weights only through git-lfs); a clone of something else does not
    (
        [
            "$ git clone https://huggingface.co/mistralai/Mistral-7B-v0.1 /data/m",
            "Cloning into '/data/m'...",
            "$ vllm serve /data/m",
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        ],
        "other",
        True,
    ),
    # ... or a listing of the model's folder showing its .git folder (held-out set PD)
    (
        [
            "$ ls -la /data/models/Mistral-7B-Instruct-v0.3/",
            "drwxr-xr-x 8 mlops mlops    4096 Oct 24 10:02 .git",
            "-rw-r--r-- 1 mlops mlops     135 Oct 24 10:02 model-00001-of-00003.safetensors",
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        ],
        "other",
        True,
    ),
    (
        [
            "git clone https://github.com/vllm-project/vllm.git && cd vllm",
            "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        ],
        "network",
        False,
    ),
    # V0's client giving up on the engine's health check is the engine's end, a
    # consequence: the GPUs' fault it died of, printed before it, decides (held-out OT)
    (
        [
            "[rank2]:[E1009 02:14:33.218443374 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=184121, OpType=GATHER, "
            "NumelIn=32064, NumelOut=0, Timeout(ms)=600000) ran for 600081 milliseconds "
            "before timing out.",
            "ERROR 10-09 02:14:42 client.py:250] TimeoutError('No heartbeat received from "
            "MQLLMEngine')",
            "ERROR 10-09 02:14:42 client.py:250] NoneType: None",
        ],
        "cuda_fault",
        False,
    ),
    # Ray's head losing a node (its heartbeat missed) ends the start; the collectives'
    # abort after it is the node's loss, a consequence (held-out set OU)
    (
        [
            "2024-10-02 14:21:48,117\tWARNING worker.py:2263 -- The node with node id: 9b3e "
            "and address: 10.0.0.12 and node name: 10.0.0.12 has been marked dead because "
            "the detector has missed too many heartbeats from it. This can happen when a "
            "\t(1) raylet crashes unexpectedly (OOM, etc.) ",
            "ERROR 10-02 14:21:49 worker_base.py:464] torch.distributed.DistBackendError: "
            "NCCL communicator was aborted on rank 0.",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
            "task.",
        ],
        "other",
        False,
    ),
    # The raylet's summary of its workers' ends (node_manager.cc): killed for memory only
    # when it counts one; "0 Workers ... killed due to memory pressure" after another
    # cause (here a GPU fault) says no memory kill happened.
    (
        [
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "(raylet, ip=10.1.4.22) [2024-07-25 04:18:41,009 E 381 381] (raylet) "
            "node_manager.cc:3069: 0 Workers (tasks / actors) killed due to memory pressure "
            "(OOM), 1 Workers crashed due to other reasons at node (ID: 7a0c4e91) which has "
            "IP 10.1.4.22. Refer to the documentation on how to address the out of memory "
            "issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html.",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "(raylet) node_manager.cc:3069: 0 Workers (tasks / actors) killed due to memory "
            "pressure (OOM), 3 Workers crashed due to other reasons at node (ID: 7a0c4e91)",
        ],
        "other",
        False,
    ),
    (
        [
            "(raylet) node_manager.cc:3069: 2 Workers (tasks / actors) killed due to memory "
            "pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 7a0c4e91)",
        ],
        "oom",
        True,
    ),
    # vLLM's Ray executor still waiting for its placement group after minutes
    # (ray_utils._wait_until_pg_ready's report): the log ends stuck there.
    (
        [
            "INFO 11-27 18:20:09 api_server.py:585] vLLM API server version 0.6.4.post1",
            "INFO 11-27 18:25:35 ray_utils.py:270] Waiting for creating a placement group of "
            "specs for 310 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.2': 0.001}, {'GPU': 1.0}].",
        ],
        "bad_config",
        True,
    ),
    # Amazon ECS's description of a stopped task: its container killed for the task's
    # memory (oom), or exited with a code and no reason (other, transient).
    (
        [
            '            "exitCode": 137,',
            '            "reason": "OutOfMemoryError: Container killed due to memory usage"',
            "INFO 02-27 14:03:26 model_runner.py:1110] Starting to load model Qwen/Qwen2.5-32B",
        ],
        "oom",
        True,
    ),
    (
        [
            "INFO 02-27 14:03:26 model_runner.py:1110] Starting to load model Qwen/Qwen2.5-32B",
            '            "exitCode": 1,',
        ],
        "other",
        False,
    ),
    # Two options the user chose that do not go together (a quantization with a
    # parallelism, eager mode): bad_config, also in vLLM 0.5's worker report; the
    # model's own limit ("Model X does not support LoRA") stays model_requirement.
    (
        ["ValueError: BitsAndBytes quantization with TP or PP is not supported yet."],
        "bad_config",
        True,
    ),
    # a feature against the executor backend the start uses (vLLM 0.4-0.5's executors;
    # held-out sets Y and NY)
    (
        ["AssertionError: Speculative decoding not yet supported for RayGPU backend."],
        "bad_config",
        True,
    ),
    (
        ["ValueError: BitsAndBytes with enforce_eager = False is not supported yet."],
        "bad_config",
        True,
    ),
    (
        [
            "(VllmWorkerProcess pid=9) ERROR 09-10 15:27:03 multiproc_worker_utils.py:233] "
            "Exception in worker VllmWorkerProcess while processing method load_model: "
            "Prequant BitsAndBytes models with TP is not supported.Please try with PP., "
            "Traceback (most recent call last):",
            "ValueError: Prequant BitsAndBytes models with TP is not supported.Please try with PP.",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Model Qwen2MoeForCausalLM does not support LoRA, but LoRA is enabled. "
            "Support for this model may be added in the future."
        ],
        "model_requirement",
        True,
    ),
    # vLLM's engine timeout (v1/engine/utils.py) alone, and after a stalled download
    (
        [
            "(APIServer pid=1) TimeoutError: Timed out waiting for engine core processes to "
            "start. This is often caused by slow weight loading for large models. Waited 600s "
            "(configured by VLLM_ENGINE_READY_TIMEOUT_S)."
        ],
        "bad_config",
        True,
    ),
    (
        [
            "model-00009-of-00014.safetensors:  17%|█▋        | 783M/4.62G [09:41<???, 0.00B/s]",
            "(APIServer pid=1) TimeoutError: Timed out waiting for engine core processes to start.",
        ],
        "network",
        False,
    ),
    # protobuf 4+ refusing code generated for protobuf 3: what the image pins
    (
        [
            "TypeError: Descriptors cannot not be created directly.",
            "If this call came from a _pb2.py file, your generated code is out of date and "
            "must be regenerated with protoc >= 3.19.0.",
        ],
        "other",
        True,
    ),
    # Argo Workflows' step message for a pod killed for its memory limit
    (
        [
            "INFO 09-12 03:41:02 model_runner.py:1014] Starting to load model meta-llama/x...",
            " └─✖ serve           vllm-serve     llm-eval-7xk2p-serve-2611794021  2m        "
            "OOMKilled (exit code 137)",
        ],
        "oom",
        True,
    ),
    # torch's message cut short of "this process has"'s number: the process it lists
    # before "this process" is another, holding most of the GPU (transient) or little
    (
        [
            "CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of "
            "79.25 GiB of which 2.19 GiB is free. Process 1877 has 48.22 GiB memory in use. "
            "Including non-PyTorch memory, this process has 28.8"
        ],
        "oom",
        False,
    ),
    (
        [
            "CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of "
            "79.25 GiB of which 2.19 GiB is free. Process 1877 has 1.22 GiB memory in use. "
            "Including non-PyTorch memory, this process has 75.8"
        ],
        "oom",
        True,
    ),
    # torch's compiler without Triton, the inner exception under dynamo's report
    (
        [
            "torch._dynamo.exc.BackendCompilerFailed: backend='<vllm.compilation.backends."
            "VllmBackend object at 0xfffe6c2b1d90>' raised:",
            "TritonMissing: Cannot find a working triton installation. Either the package is "
            "not installed or it is too old.",
        ],
        "other",
        True,
    ),
    # torch.distributed's and Gloo's words for a rendezvous setting that cannot work
    (
        [
            "ValueError: Error initializing torch.distributed using env:// rendezvous: "
            "environment variable MASTER_ADDR expected, but not set"
        ],
        "bad_config",
        True,
    ),
    (
        [
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
            "Unable to find address for: eth1"
        ],
        "bad_config",
        True,
    ),
    (
        ["ValueError: Port could not be cast to integer value as '4c8:1200::17:44:41211'"],
        "bad_config",
        True,
    ),
    # vLLM's server socket bound to a --host not on this machine
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/'
            'api_server.py", line 834, in create_server_socket',
            "    sock.bind(addr)",
            "OSError: [Errno 99] Cannot assign requested address",
        ],
        "bad_config",
        True,
    ),
    # supervisord's report of its program killed, no cause printed (held-out SK)
    (
        [
            "INFO 09-12 14:31:29 model_runner.py:997] Starting to load model /models/m...",
            "2024-09-12 14:32:11,902 INFO exited: vllm (terminated by SIGKILL; not expected)",
        ],
        "other",
        False,
    ),
    # NCCL's result by its C name, as CuPy raises it (held-out SA)
    (
        [
            "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: "
            "unhandled cuda error"
        ],
        "cuda_fault",
        False,
    ),
    # a library of the image refusing the image's Python, raised through a model's code
    # (held-out RS): the image, not the model, every restart the same
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/models/commandr.py", '
            "line 50, in <module>",
            '  File "/usr/lib/python3.12/site-packages/torch/__init__.py", line 1801, in compile',
            '    raise RuntimeError("Dynamo is not supported on Python 3.12+")',
            "RuntimeError: Dynamo is not supported on Python 3.12+",
        ],
        "other",
        True,
    ),
    (["RuntimeError: Python 3.12+ not yet supported for torch.compile"], "other", True),
    # torch 2.6+'s weights_only default refusing a pickled checkpoint
    (
        [
            "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, "
            "to do so you have two options"
        ],
        "other",
        True,
    ),
    # docker ps's and docker inspect's report of a container's exit (no cause printed)
    (
        [
            "INFO 05-12 02:15:31 [backends.py:420] Using cache directory: /root/.cache/vllm",
            'a93c1f07e2d4   vllm/vllm-openai:v0.8.5   "python3 -m vllm.ent…"   14 minutes ago   '
            "Exited (137) 11 minutes ago   qwen-vl",
        ],
        "other",
        False,
    ),
    (
        [
            "INFO 05-12 02:15:31 [backends.py:420] Using cache directory: /root/.cache/vllm",
            '{"Status":"exited","Running":false,"OOMKilled":false,"ExitCode":1,"Error":""}',
        ],
        "other",
        False,
    ),
    # huggingface_hub's warning that the cache's disk is short (file_download.py's
    # _check_disk_space), before what the full disk then breaks (held-out set QA): a
    # shard missing from the snapshot reads as a truncated download alone
    (
        [
            "INFO 12-05 02:31:34 weight_utils.py:243] Using model weights format ['*.safetensors']",
            "/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py:653: "
            "UserWarning: Not enough free disk space to download the file. The expected file "
            "size is: 3983.54 MB. The target location /root/.cache/huggingface/hub/"
            "models--Qwen--Qwen2.5-72B-Instruct-AWQ/blobs only has 1807.22 MB free disk "
            "space.",
            "  warnings.warn(",
            "model-00005-of-00011.safetensors:  45%|████▌     | 1.80G/3.98G [00:18<00:22]",
            "(VllmWorkerProcess pid=108) ERROR 12-05 02:34:37 multiproc_worker_utils.py:229] "
            "FileNotFoundError: [Errno 2] No such file or directory: '/root/.cache/huggingface/"
            "hub/models--Qwen--Qwen2.5-72B-Instruct-AWQ/snapshots/698703e/"
            "model-00005-of-00011.safetensors'",
        ],
        "other",
        False,
    ),
    (
        [
            "UserWarning: Not enough free disk space to download the file.",
            "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
        ],
        "other",
        False,
    ),
    # A step's tools in their own words (stop 52, held-out TP and TW): botocore's lost
    # connection as the AWS CLI prints it, Go's net/http error (ollama, rclone, s5cmd),
    # Go's lower-case "no space left on device", a program a step's script runs that the
    # image lacks, a config file that is not JSON.
    (
        [
            "download failed: s3://m/llama/model-00002-of-00004.safetensors to "
            "llama/model-00002-of-00004.safetensors Connection was closed before we received "
            'a valid response from endpoint URL: "https://m.s3.amazonaws.com/llama/x".'
        ],
        "network",
        False,
    ),
    (
        [
            'Error: max retries exceeded: Get "https://registry.ollama.ai/v2/library/qwen2/'
            'blobs/sha256:66b9": unexpected EOF'
        ],
        "network",
        False,
    ),
    (
        [
            'ERROR "cp s3://b/m/model-00012-of-00030.safetensors /mnt/m/model-00012-of-00030.'
            'safetensors": write /mnt/m/model-00012-of-00030.safetensors: no space left on device'
        ],
        "other",
        False,
    ),
    (["/entrypoint.sh: line 9: aws: command not found"], "other", True),
    # A start command's variable the platform did not expand (no shell): vLLM rejects the
    # literal name as the value (held-out UC)
    (
        [
            "KeyError: 'invalid tool call parser: $TOOL_PARSER (chose from { hermes,"
            "llama3_json,mistral,pythonic })'"
        ],
        "bad_config",
        True,
    ),
    # transformers' KeyError on the model type, then its own words that the repository
    # needs its code run: the requirement it states decides (held-out TX)
    (
        [
            "KeyError: 'chatglm'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/site-packages/transformers/dynamic_module_utils.py", '
            "line 771, in resolve_trust_remote_code",
            "    raise ValueError(",
            "ValueError: The repository THUDM/glm-4-9b-chat contains custom code which must be "
            "executed to correctly load the model. You can inspect the repository content at "
            "https://hf.co/THUDM/glm-4-9b-chat .",
        ],
        "remote_code",
        True,
    ),
    # CMake finding no compiler in the image (a build at start-up or a step's, as
    # llama.cpp's tools before a GGUF conversion; held-out UJ): the image's, permanent
    (
        [
            "-- The C compiler identification is unknown",
            "CMake Error at CMakeLists.txt:2 (project):",
            "  No CMAKE_C_COMPILER could be found.",
        ],
        "other",
        True,
    ),
    # A model's own code importing a module of a library the image has, missing in its
    # version (a dotted name: the library is there; held-out UI): the code's, remote_code
    (
        [
            "Traceback (most recent call last):",
            '  File "/root/.cache/huggingface/modules/transformers_modules/orion/'
            'configuration_orion.py", line 6, in <module>',
            "    from transformers.modeling_rope_utils import rope_config_validation",
            "ModuleNotFoundError: No module named 'transformers.modeling_rope_utils'",
        ],
        "remote_code",
        True,
    ),
    # nvidia-smi missing in a container (the runtime mounts it with the driver): the
    # container was given no GPU (held-out UQ), not a program the image lacks
    (
        [
            "RuntimeError: Failed to infer device type",
            "$ docker compose exec vllm nvidia-smi",
            'OCI runtime exec failed: exec failed: unable to start container process: exec: "nvidia-smi": '
            "executable file not found in $PATH: unknown",
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            # CuPy's allocator, as printed on an H100 (fixtures/gpu/logs/oom_cupy.log)
            "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 214,748,364,800 bytes (allocated so far: 0 bytes).",
        ],
        "oom",
        True,
    ),
    (
        ["Out of memory allocating 1,073,741,824 bytes (allocated so far: 77,309,411,328 bytes)."],
        "oom",
        True,
    ),
    (
        [
            # xFormers on a GTX 1080 Ti: every kernel's reason is the GPU's capability
            "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
            "     query       : shape=(1, 2048, 16, 128) (torch.float16)",
            "`cutlassF` is not supported because:",
            "    requires device with capability > (7, 0) but your GPU has capability (6, 1) (too old)",
        ],
        "model_requirement",
        True,
    ),
    (
        [
            # xFormers built without CUDA (the image's): its reason comes first, before the
            # capability's, in each kernel's list
            "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
            "`flshattF@v2.3.6` is not supported because:",
            "    xFormers wasn't build with CUDA support",
            "    requires device with capability > (8, 0) but your GPU has capability (7, 0) (too old)",
        ],
        "other",
        True,
    ),
    (
        [
            # vllm/utils/deep_gemm.py's stub when the package is missing (held-out WE)
            "RuntimeError: DeepGEMM backend is not available or outdated. Please install or update the `deep_gemm` to a newer version to enable FP8 kernels.",
        ],
        "other",
        True,
    ),
    (
        [
            # vLLM's ShardedStateLoader (model_loader/loader.py, 0.4-0.6; sharded_state_loader.py
            # after), run only for --load-format sharded_state, on an ordinary checkpoint
            # (held-out WN): the load format chosen, not the model
            "ValueError: Could not find checkpoint files '/models/llama/model-rank-0-part-*.safetensors', only pre-sharded checkpoints are currently supported!",
        ],
        "bad_config",
        True,
    ),
    (
        [
            # a repository's own tokenizer code broken by transformers 4.34+ (ChatGLM's,
            # Baichuan's), its frames lost in Triton's status table (held-out WS)
            "INFO 05-09 06:22:49 llm_engine.py:98] Initializing an LLM engine (v0.4.0.post1) "
            "with config: model='THUDM/chatglm3-6b', trust_remote_code=True, dtype=torch.float16",
            "E0509 06:22:50.816861 1 model_lifecycle.cc:630] failed to load 'chatglm3' version "
            "1: Internal: AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'",
        ],
        "remote_code",
        True,
    ),
    (
        [
            # KServe's storage initializer finding nothing under the model's S3 prefix
            # (kserve/storage/storage.py; held-out WT)
            "RuntimeError: Failed to fetch model. No model found in llama-3-8b-instruct/.",
        ],
        "model_not_found",
        True,
    ),
    (
        [
            # the container's start script under set -u, a variable the endpoint never
            # set (held-out WT): the same script fails every restart
            "/opt/scripts/start.sh: line 17: SERVED_MODEL_NAME: unbound variable",
        ],
        "other",
        True,
    ),
    (
        ["/entrypoint.sh: line 4: syntax error near unexpected token `fi'"],
        "other",
        True,
    ),
    # A platform's reason for a container's end in its own format (Vertex AI's protobuf
    # text, a key=value record, kubectl describe's aligned column), and its exit code as
    # a record's field (held-out XH): the memory limit; a code 137 alone, a kill.
    (
        [
            "Model server terminated: model server container terminated: exit_code: 137 "
            'reason: "OOMKilled" started_at { seconds: 1724231640 }'
        ],
        "oom",
        True,
    ),
    (["container=vllm reason=OOMKilled exit_code=137"], "oom", True),
    (["      Reason:       OOMKilled"], "oom", True),
    (
        ["Model server terminated: model server container terminated: exit_code: 137"],
        "other",
        False,
    ),
    # A platform's own wording of vLLM's refusals (held-out XT): Bedrock Custom Model
    # Import's architecture refused, ending the sentence; Azure ML's event of a container
    # ended for its memory, as ECS's.
    (
        [
            '    "failureMessage": "Model architecture Gemma3ForConditionalGeneration is not '
            "supported. Please refer to the Amazon Bedrock Custom Model Import documentation "
            'for the list of supported architectures.",'
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "Kind: Pod, Name: OutOfMemory, Type: Warning, Time: 2024-11-12T07:47:58.300482Z, "
            "Message: Container terminated due to insufficient memory. Please see "
            "troubleshooting guide"
        ],
        "oom",
        True,
    ),
    (["OutOfMemoryError: Container killed due to memory usage"], "oom", True),
    # vLLM's conclusion that a hub id is missing after the hub's requests for it failed
    # on the network and were retried (held-out XW, XX): the hub never answered; without
    # them, the repo is missing.
    *(
        (
            [
                *retried,
                "ValueError: Invalid repository ID or local directory specified: "
                "'Qwen/Qwen2.5-7B-Instruct'.",
            ],
            category,
            permanent,
        )
        for retried, category, permanent in (
            (
                [
                    "'(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max "
                    "retries exceeded with url: /Qwen/Qwen2.5-7B-Instruct/resolve/main/config.json "
                    '(Caused by NameResolutionError(\\"<urllib3.connection.HTTPSConnection object '
                    "at 0x7f5c1e2a3b90>: Failed to resolve 'huggingface.co'\\\"))\"), '(Request ID: "
                    "2b1f)')' thrown while requesting HEAD https://huggingface.co/Qwen/Qwen2.5-7B-"
                    "Instruct/resolve/main/config.json",
                    "Retrying in 8s [Retry 5/5].",
                ],
                "network",
                False,
            ),
            ([], "model_not_found", True),
        )
    ),
    # The container runtime's words for an image it could not get (held-out YH): no such
    # tag, none for the node's architecture, no access; the report without a reason; a
    # daemon without the NVIDIA runtime a compose file asks for (no GPU for the container).
    *(
        ([line], "other", True)
        for line in (
            'Warning  Failed  86s (x4 over 3m2s)  kubelet  Failed to pull image "vllm/vllm-openai:'
            'v0.7.3": rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/'
            'vllm/vllm-openai:v0.7.3": no match for platform in manifest: not found',
            '51s  Warning  Failed  pod/llm-vllm-5f6c  Failed to pull image "vllm/vllm-openai:0.6.2": '
            'rpc error: code = NotFound desc = failed to resolve reference "docker.io/vllm/vllm-'
            'openai:0.6.2": docker.io/vllm/vllm-openai:0.6.2: not found',
            "Error response from daemon: manifest for vllm/vllm-openai:0.6.2 not found: manifest "
            "unknown: manifest unknown",
            "Error response from daemon: pull access denied for acme/vllm-private, repository "
            "does not exist or may require 'docker login'",
        )
    ),
    (
        [
            '38s  Normal  BackOff  pod/llm-vllm-5f6c  Back-off pulling image "vllm/vllm-openai:v0.7.3"'
        ],
        "other",
        False,
    ),
    (["Error response from daemon: unknown or invalid runtime name: nvidia"], "cuda_fault", False),
    # A batch scheduler's cancellation of the job (held-out YA): Slurm's time limit.
    (
        [
            "Loading safetensors checkpoint shards:  24% Completed | 4/17 [00:45<02:28, 11.42s/it]",
            "slurmstepd: error: *** JOB 3390817 ON gpu-a40-11 CANCELLED AT 2024-12-30T22:01:09 "
            "DUE TO TIME LIMIT ***",
        ],
        "other",
        False,
    ),
    # Ray's head already running on its port (held-out YL), raised as a ConnectionError:
    # a leftover cluster holds the port, not the hub's network.
    (
        [
            "ConnectionError: Ray is trying to start at 10.20.1.5:6379, but is already "
            "running at 10.20.1.5:6379. Please specify a different port using the `--port` "
            "flag of `ray start` command."
        ],
        "other",
        False,
    ),
    # CUDA_VISIBLE_DEVICES set to "" (held-out YV: compose interpolating an unset
    # variable): vLLM's platform code sees no GPU, as a host without one (0.6 to 0.9's
    # wordings); below it, the API server's generic wrapper.
    *(
        (
            [
                f"RuntimeError: {name} is set to empty string, which means {what} support is "
                f"disabled. If you are using ray, please unset the environment variable "
                f"`{name}` inside the worker/actor.",
                "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
            ],
            "cuda_fault",
            False,
        )
        for name, what in (
            ("CUDA_VISIBLE_DEVICES", "GPU"),
            ("CUDA_VISIBLE_DEVICES", "current platform"),
        )
    ),
    # requests refusing before it connects: REQUESTS_CA_BUNDLE names a CA file the host
    # lacks (held-out YV): the TLS path to the hub, as a certificate refused.
    (
        [
            "OSError: Could not find a suitable TLS CA certificate bundle, invalid path: "
            "/etc/pki/ca-trust/source/anchors/corp-root-ca.pem"
        ],
        "network",
        False,
    ),
    # NVRTC without its builtins library (held-out ZA: torch's jiterator in the sampler
    # of the profile run): a CUDA library the image lacks
    (
        [
            "RuntimeError: nvrtc: error: failed to open libnvrtc-builtins.so.12.1.",
            "  Make sure that libnvrtc-builtins.so.12.1 is installed correctly.",
        ],
        "other",
        True,
    ),
    # Docker's daemon refusing to publish the port (held-out ZJ: another container on
    # 8000): the port in use, not a start under way
    (
        [
            "docker: Error response from daemon: driver failed programming external "
            "connectivity on endpoint vllm-qwen (e3a9c1f07b2d): Bind for 0.0.0.0:8000 "
            "failed: port is already allocated."
        ],
        "other",
        False,
    ),
    # A platform's health check killing a slow start (held-out ZR): Cloud Run's startup
    # probe and its deploy's summary, ECS's load balancer, Kubernetes' startup probe
    *(
        (
            [
                "INFO 05-12 09:14:41 [weight_utils.py:265] Using model weights format "
                "['*.safetensors']",
                line,
            ],
            "other",
            False,
        )
        for line in (
            "2025-05-12T09:18:23.004117Z\tSTARTUP TCP probe failed 1 time consecutively for "
            'container "vllm-openai-1" on port 8000. The instance was not started.',
            "ERROR: (gcloud.beta.run.deploy) Revision 'vllm-gemma-00001-w7z' is not ready and "
            "cannot serve traffic. The user-provided container failed to start and listen on "
            "the port defined provided by the PORT=8000 environment variable within the "
            "allocated time",
            "Task failed ELB health checks in (target-group arn:aws:elasticloadbalancing:"
            "us-east-1:123456789012:targetgroup/vllm-tg/4c1f2e9d8b7a6c50)\t137",
            "  Normal   Killing    12s  kubelet  Container vllm failed startup probe, will be "
            "restarted",
        )
    ),
    # The host's GPU stack refusing the container (held-out ZZ): runc failing to mount a
    # driver library a stale CDI spec names; Kubernetes admitting a pod whose GPUs the
    # device plugin marked unhealthy after an Xid
    (
        [
            "Error response from daemon: failed to create task for container: failed to "
            "create shim task: OCI runtime create failed: runc create failed: unable to start "
            'container process: error during container init: error mounting "/usr/lib/'
            'x86_64-linux-gnu/libcuda.so.535.183.01" to rootfs at "/usr/lib/x86_64-linux-gnu/'
            'libcuda.so.535.183.01": no such file or directory: unknown'
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            "I0312 06:41:07.283198       1 health.go:177] XidCriticalError: Xid=48 on "
            "Device=GPU-3b7d0e1f-92c4-4a6e-8f15-c0d2e9a7b613; marking device as unhealthy.",
            "  Warning  UnexpectedAdmissionError  15s   kubelet            Allocate failed due "
            "to requested number of devices unavailable for nvidia.com/gpu. Requested: 2, "
            "Available: 1, which is unexpected",
        ],
        "cuda_fault",
        False,
    ),
    # ROCm's HSA runtime aborting a queue (held-out AAE: an MI250X's profile run)
    (
        [
            ":0:rocdevice.cpp            :2875: 2418831062 us: [pid:2231  tid:0x7f36d27fc640] "
            "Callback: Queue 0x7f2dc4a00000 aborting with error : "
            "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory "
            "beyond the largest legal address. code: 0x29",
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ],
        "cuda_fault",
        False,
    ),
    # Weight files (held-out ZX): safetensors' own error quoting a shard's path in double
    # quotes (a folder copied with dangling symlinks: the files are not there); torch's
    # read past a truncated .bin's end (an interrupted download)
    (
        [
            "(EngineCore_DP0 pid=203) ERROR 10-14 21:17:40 [core.py:708] FileNotFoundError: "
            'No such file or directory: "/models/Qwen3-8B/model-00001-of-00005.safetensors"'
        ],
        "model_not_found",
        True,
    ),
    (
        [
            "    typed_storage._untyped_storage._set_from_file(",
            "RuntimeError: unexpected EOF, expected 6291456 more bytes. The file might be "
            "corrupted.",
        ],
        "network",
        False,
    ),
    # A setting refused for another setting (issue 21, section 4: a load format or backend
    # the other choice does not support): the values the user chose, bad_config, wherever
    # it is raised (held-out AAS, AAT); a setting refused for the GPU stays a requirement.
    (
        [
            "(EngineCore_DP0 pid=203) ERROR 10-14 15:32:00 [core.py:708] ValueError: "
            "CUDAGraphMode.FULL is not supported with FlexAttentionMetadataBuilder backend "
            "(support: AttentionCGSupport.NEVER) ; please try cudagraph_mode=PIECEWISE, and "
            "make sure compilation mode is VLLM_COMPILE"
        ],
        "bad_config",
        True,
    ),
    (
        ["ValueError: Model loader extra config is not supported for load format LoadFormat.AUTO"],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: BitsAndBytes load format and QLoRA adapter only support "
            "'bitsandbytes' quantization, but got None"
        ],
        "bad_config",
        True,
    ),
    (
        ["ValueError: The quantization method fp8 is not supported for the current GPU."],
        "model_requirement",
        True,
    ),
    # vLLM 0.8+'s get_config raising "Invalid repository ID" from a module its lookup
    # imports, missing from the image (VLLM_USE_MODELSCOPE without modelscope; held-out
    # ACQ): the image, permanent; the wrapper alone, or after vLLM's own compiled module
    # missing (a build that says so and goes on), a model not found.
    (
        [
            '  File "/venv/lib/python3.12/site-packages/vllm/transformers_utils/utils.py", line '
            "44, in modelscope_list_repo_files",
            "    from modelscope.hub.api import HubApi",
            "ModuleNotFoundError: No module named 'modelscope'",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "ValueError: Invalid repository ID or local directory specified: "
            "'Qwen/Qwen2.5-VL-7B-Instruct'.",
        ],
        "other",
        True,
    ),
    (
        [
            "ModuleNotFoundError: No module named 'vllm._C'",
            "ValueError: Invalid repository ID or local directory specified: '/models/qwen'.",
        ],
        "model_not_found",
        True,
    ),
    (
        ["ValueError: Invalid repository ID or local directory specified: 'Qwen/Qwen2.5-7B'."],
        "model_not_found",
        True,
    ),
    # A crash inside NCCL, as the crash's own stack shows it (held-out ACW): faulthandler's
    # current thread, most recent call first, in vLLM's NCCL binding; gdb's frame of
    # libnccl. gdb's report of the signal alone: a crash of no named cause.
    (
        [
            "Fatal Python error: Segmentation fault",
            "",
            "Current thread 0x00007f1c9a7e4740 (most recent call first):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_'
            'communicators/pynccl_wrapper.py", line 309 in ncclCommInitRank',
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_'
            'communicators/pynccl.py", line 99 in __init__',
        ],
        "cuda_fault",
        False,
    ),
    (
        [
            'Thread 1 "python3" received signal SIGSEGV, Segmentation fault.',
            "0x00007ffe6a9c3b1e in ncclTopoGetXmlFromSys(ncclXmlNode*, ncclXml*) () from "
            "/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "(gdb) bt",
            "#0  0x00007ffe6a9c3b1e in ncclTopoGetXmlFromSys(ncclXmlNode*, ncclXml*) () from "
            "/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2",
        ],
        "cuda_fault",
        False,
    ),
    (['Thread 1 "python3" received signal SIGSEGV, Segmentation fault.'], "other", False),
    (["Program terminated with signal SIGABRT, Aborted."], "other", False),
    # a torch build without a feature the start asks of it: the image's (held-out ADF)
    (
        [
            "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
        ],
        "other",
        True,
    ),
    # vLLM's argument parser could not read the --config YAML file, in both wordings,
    # with the parser's error under it (held-out ADR, stop 59)
    *(
        (
            [
                f"ERROR 03-05 11:02:17 utils.py:1205] Unable to read the config file at "
                f"/etc/vllm/config.yaml. {tail}",
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/dist-packages/yaml/scanner.py", line 577, '
                "in fetch_value",
                "yaml.scanner.ScannerError: mapping values are not allowed here",
            ],
            "bad_config",
            True,
        )
        for tail in ("                Make sure path is correct", "Check path correctness")
    ),
    # ROCm's HSA runtime reports an exception on the device as it aborts, then vLLM's
    # worker died (held-out AEK, stop 59)
    (
        [
            "HW Exception by GPU node-3 (Agent handle: 0x5611c3d42a10) reason :GPU Hang",
            "ERROR 09-17 23:12:44 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid "
            "7711 died, exit code: -6",
            "Aborted (core dumped)",
        ],
        "cuda_fault",
        False,
    ),
    # Python's multiprocessing refusing a spawned child that re-ran the program's start:
    # no main guard (held-out AEG, stop 59), with vLLM's wrapper after it
    (
        [
            "RuntimeError: ",
            "        An attempt has been made to start a new process before the",
            "        current process has finished its bootstrapping phase.",
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ],
        "other",
        True,
    ),
    # torch's heartbeat monitor: the NCCL watchdog thread stuck in a NCCL/CUDA call, the
    # process then aborted (held-out AEJ, stop 59)
    (
        [
            "[rank5]:[E1023 14:50:39.118730422 ProcessGroupNCCL.cpp:1375] [PG 0 Rank 5] "
            "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
            "monitoring enqueued collectives.",
            "[rank5]:[E1023 14:50:39.118925581 ProcessGroupNCCL.cpp:1284] [PG 0 Rank 5] "
            "Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
            "ERROR 10-23 14:58:41 multiproc_worker_utils.py:117] Worker VllmWorkerProcess pid "
            "356 died, exit code: -6",
        ],
        "cuda_fault",
        False,
    ),
    # Intel GPUs (XPU): SYCL's report of the Level Zero backend's status, in the unified
    # runtime's and the older plugin interface's names; out of device memory is oom.
    (
        [
            "RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
        ],
        "cuda_fault",
        False,
    ),
    (
        ["RuntimeError: Native API failed. Native API returns: -1 (PI_ERROR_DEVICE_NOT_FOUND)"],
        "cuda_fault",
        False,
    ),
    (
        ["RuntimeError: ZE_RESULT_ERROR_DEVICE_LOST: device hung, reset was successful"],
        "cuda_fault",
        False,
    ),
    (
        [
            "RuntimeError: level_zero backend failed with error: 39 "
            "(UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        ],
        "oom",
        True,
    ),
    # VLLM_LOGGING_CONFIG_PATH naming a file that is not there, or not a JSON object
    # (vllm/logger.py passes the value as a second argument: the message prints as a
    # tuple); the user's setting.
    (
        [
            "RuntimeError: ('Could not load logging config. File does not exist: %s', "
            "'/etc/vllm/logging_config.json')",
        ],
        "bad_config",
        True,
    ),
    (
        ["RuntimeError: Could not load logging config. File does not exist: /etc/vllm/log.json"],
        "bad_config",
        True,
    ),
    (
        ["ValueError: ('Invalid logging config. Expected dict, got %s.', 'list')"],
        "bad_config",
        True,
    ),
    # a library's own check of a package it needs, missing from the image (FastAPI's)
    (
        ['RuntimeError: Form data requires "python-multipart" to be installed.'],
        "other",
        True,
    ),
    # transformers: the model folder's own config.json is not JSON (a damaged file of the
    # model's: other, permanent); any other file read as the config (a GGUF file named
    # without its extension, the real corpus's vllm-7993) is the name the user gave.
    (
        [
            "OSError: It looks like the config file at '/models/llama-ft/config.json' is not "
            "a valid JSON file.",
        ],
        "other",
        True,
    ),
    (
        [
            "OSError: It looks like the config file at '/models/ollama/granite-code:latest' is "
            "not a valid JSON file.",
        ],
        "bad_config",
        True,
    ),
    # ... and a config.json in the hub cache's snapshot: what the hub client saved in its
    # place (a proxy's page, an error body, a cut file), a download to do again: network
    (
        [
            "OSError: It looks like the config file at '/root/.cache/huggingface/hub/models--"
            "acme--tiny-7b/snapshots/41b61a33a2483885c981aa79e0df6b32407ed873/config.json' is "
            "not a valid JSON file.",
        ],
        "network",
        False,
    ),
    (
        [
            "OSError: It looks like the config file at 'C:\\Users\\me\\.cache\\huggingface\\hub"
            "\\models--acme--tiny-7b\\snapshots\\41b61a33\\config.json' is not a valid JSON file.",
        ],
        "network",
        False,
    ),
    # Ctrl-C while the GPUs waited on each other in a collective (vLLM's PyNccl): the
    # hang NCCL's watchdog would report (tests/diagnostics/classify/test_interrupted.py)
    (
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/'
            'device_communicators/pynccl.py", line 253, in all_reduce',
            "    NCCL_CHECK(",
            "KeyboardInterrupt",
        ],
        "cuda_fault",
        False,
    ),
    # Kubernetes: kubelet's eviction under the node's memory pressure (host memory, oom)
    # and disk pressure (disk-full, transient); the scheduler finding no node; the node
    # lost under the start (held-out AGQ, stop 61)
    (
        [
            "Warning  Evicted  2m  kubelet  The node was low on resource: memory. Threshold "
            "quantity: 100Mi, available: 88204Ki. Container vllm was using 61212272Ki, request "
            "is 0, has larger consumption of memory.",
        ],
        "oom",
        True,
    ),
    (
        [
            "2m  Warning  Evicted  pod/vllm-0  The node was low on resource: ephemeral-storage. "
            "Threshold quantity: 10726734540, available: 9761204Ki.",
        ],
        "other",
        False,
    ),
    (
        [
            'Warning  Evicted  1m  kubelet  Container vllm exceeded its local ephemeral storage limit "20Gi".'
        ],
        "other",
        False,
    ),
    (
        [
            "  Warning  FailedScheduling  18m  default-scheduler  0/5 nodes are available: 2 "
            "Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node affinity/selector.",
        ],
        "other",
        False,
    ),
    (
        [
            "  Ready  Unknown  Thu, 27 Mar 2025 10:21:37 +0000  Thu, 27 Mar 2025 10:22:19 +0000"
            "  NodeStatusUnknown  Kubelet stopped posting node status.",
        ],
        "other",
        False,
    ),
    (
        [
            "  Normal  TaintManagerEviction  4m  taint-eviction-controller  Marking for deletion Pod default/vllm-0"
        ],
        "other",
        False,
    ),
    # vLLM's own csrc (the sleep-mode allocator's CUDA_CHECK) writes "CUDA Error:"
    (
        [
            "RuntimeError: CUDA Error: operation not supported at /workspace/csrc/cumem_allocator.cpp:62"
        ],
        "cuda_fault",
        False,
    ),
    # torch's message when PyTorch in this process holds nothing ("0 bytes"): the GPU is
    # held by other processes (held-out AGL, stop 61)
    (
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.12 GiB. GPU 0 has a "
            "total capacity of 14.74 GiB of which 482.12 MiB is free. Process 9923 has 13.85 GiB "
            "memory in use. Process 10411 has 420.00 MiB memory in use. Of the allocated memory 0 "
            "bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.",
        ],
        "oom",
        False,
    ),
    # IPython's numbered context lines that are a raise or a string literal are source (a
    # branch that may not have run), not the message raised (held-out AGV, stop 61)
    (
        [
            "ValueError                                Traceback (most recent call last)",
            "File /opt/conda/lib/python3.10/site-packages/vllm/entrypoints/llm.py:175, in "
            "LLM.__init__(self, model, **kwargs)",
            "    152     raise TypeError(",
            "    153         \"LLM.__init__() got an unexpected keyword argument 'swap_space'\")",
            "--> 175 self.llm_engine = LLMEngine.from_engine_args(engine_args)",
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
            "8.0. Your Tesla T4 GPU has compute capability 7.5.",
        ],
        "model_requirement",
        True,
    ),
    # A hub repo vLLM's tokenizer loads the Hugging Face way that has no config.json (a
    # repo in Mistral's format: params.json, tekken.json; held-out CS, AHE): the tokenizer
    # options do not fit the repo (bad_config); an empty local tokenizer folder is missing.
    *(
        (
            [
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/'
                'tokenizer.py", line 146, in get_tokenizer',
                "    tokenizer = AutoTokenizer.from_pretrained(",
                f"OSError: {where} does not appear to have a file named config.json. Checkout "
                f"'https://huggingface.co/{where}/tree/main' for available files.",
            ],
            category,
            True,
        )
        for where, category in (
            ("mistralai/Pixtral-12B-2409", "bad_config"),
            ("/models/tokenizer", "model_not_found"),
        )
    ),
    # An adapter using a LoRA feature vLLM does not implement (PEFTHelper's feature
    # checks), LoRA on an encoder/decoder model: what the model lacks, as "does not support
    # LoRA" (held-out AHC, AEN); the adapter's rank above --max-lora-rank is the option's.
    *(
        ([f"ValueError: Call to add_lora method failed: {message}"], category, True)
        for message, category in (
            ("vLLM does not yet support DoRA.", "model_requirement"),
            ("vLLM does not support QALoRA.", "model_requirement"),
            ("vLLM only supports modules_to_save being None.", "model_requirement"),
            ("LoRA rank 64 is greater than max_lora_rank 16.", "bad_config"),
        )
    ),
    (
        [
            "NotImplementedError: LoRA is currently not currently supported with "
            "encoder/decoder models.",
        ],
        "model_requirement",
        True,
    ),
    # vLLM's safetensors lookup logged at ERROR (it goes on without the metadata), the
    # log ending there: the hub was not reached, whatever the held message (stop 62)
    (
        [
            "(APIServer pid=1) ERROR 08-14 09:51:30 [config.py:130] Error retrieving "
            "safetensors: Repo id must be in the form 'repo_name' or "
            "'namespace/repo_name': '/models/gpt-oss-120b'. Use `repo_type` argument if "
            "needed., retrying 1 of 2",
        ],
        "network",
        False,
    ),
    # "no kernel image" after torch's warning that the GPU's architecture is missing from
    # its build: a three-digit one (sm_100 and later) is newer than the image's CUDA
    # build, the image's (other, permanent); an older GPU below the build's oldest, or no
    # warning, is the GPU's requirement (held-out writers 25 to 7, stop 62)
    *(
        (
            [
                *warning,
                "RuntimeError: CUDA error: no kernel image is available for execution on the "
                "device",
            ],
            category,
            True,
        )
        for warning, category in (
            (
                [
                    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:235: "
                    "UserWarning: ",
                    "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
                    "with the current PyTorch installation.",
                    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 "
                    "sm_75 sm_80 sm_86 sm_90.",
                ],
                "other",
            ),
            (
                [
                    "NVIDIA GB200 with CUDA capability sm_100 is not compatible with the "
                    "current PyTorch installation.",
                ],
                "other",
            ),
            (
                [
                    "Tesla P40 with CUDA capability sm_61 is not compatible with the current "
                    "PyTorch installation.",
                ],
                "model_requirement",
            ),
            ([], "model_requirement"),
        )
    ),
    # torch's warning alone for such a GPU: the image's; for a GPU older than the build's
    # oldest, the GPU's requirement (stop 62)
    *(
        (
            [
                f"{gpu} with CUDA capability {arch} is not compatible with the current "
                "PyTorch installation.",
                "Traceback (most recent call last):",
            ],
            category,
            True,
        )
        for gpu, arch, category in (
            ("NVIDIA GeForce RTX 5080", "sm_120", "other"),
            ("Tesla K80", "sm_37", "model_requirement"),
        )
    ),
    # vLLM without a platform in an environment whose PyTorch is the CPU build, or whose
    # CUDA runtime library (the CUDA wheels' libcudart) is missing: the image's packages
    # (held-out AHM, stop 62); the host's driver library missing stays the host's
    *(
        (
            [
                *before,
                "WARNING 11-27 15:40:19 _custom_ops.py:20] Failed to import from vllm._C with "
                f"ImportError('{library}: cannot open shared object file: No such file or "
                "directory')",
                "RuntimeError: Failed to infer device type",
            ],
            category,
            permanent,
        )
        for before, library, category, permanent in (
            (["2.5.1+cpu False"], "libcuda.so.1", "other", True),
            ([], "libcudart.so.12", "other", True),
            ([], "libcuda.so.1", "cuda_fault", False),
        )
    ),
    # vLLM's read of a dead worker's answer cancelled ("RuntimeError: cancelled", from
    # shm_broadcast's acquire_read) is a consequence: the worker's own end before it
    # decides (held-out AHL, stop 62)
    *(
        (
            [
                *before,
                "ERROR 06-14 03:12:46 [multiproc_executor.py:135] Worker proc VllmWorker-3 "
                "died unexpectedly, shutting down executor.",
                'ERROR 06-14 03:12:47 [core.py:515]     raise RuntimeError("cancelled")',
                "ERROR 06-14 03:12:47 [core.py:515] RuntimeError: cancelled",
            ],
            category,
            False,
        )
        for before, category in (
            (
                [
                    "[rank3]:[E614 03:12:45.118304961 ProcessGroupNCCL.cpp:632] [Rank 3] "
                    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, "
                    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                    "600063 milliseconds before timing out.",
                ],
                "cuda_fault",
            ),
            ([], "other"),
        )
    ),
    # The Xet storage service's own 401/403 after the hub answered: its connection, not
    # the repo's access; the hub's API answered with a page that is not JSON (a proxy's);
    # requests without PySocks for a SOCKS proxy: the image's (held-out AHS, stop 62)
    (
        [
            '  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", '
            "line 629, in xet_get",
            "RuntimeError: Data processing error: CAS service error : Reqwest Error: HTTP status "
            "client error (403 Forbidden), domain: https://cas-server.xethub.hf.co/reconstruction/"
            "7e9a3c1d5b2f",
        ],
        "network",
        False,
    ),
    (
        [
            '  File "/usr/local/lib/python3.12/site-packages/huggingface_hub/utils/_pagination.py", '
            "line 38, in paginate",
            '  File "/usr/local/lib/python3.12/site-packages/requests/models.py", line 978, in json',
            "    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)",
            "requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        ],
        "network",
        False,
    ),
    (
        ["requests.exceptions.InvalidSchema: Missing dependencies for SOCKS support."],
        "other",
        True,
    ),
    # A person's heading of the next try ("restart 2:"): what follows is that try's
    # output, and its cause decides (held-out AHQ, stop 62)
    *(
        (
            [
                "restart 1: huggingface_hub.errors.HfHubHTTPError: 504 Server Error: Gateway "
                "Time-out for url: https://huggingface.co/api/models/OpenGVLab/InternVL2-8B/"
                "revision/main",
                *heading,
                "ValueError: Loading OpenGVLab/InternVL2-8B requires you to execute the "
                "configuration file in that repo on your local machine. Make sure you have read "
                "the code there to avoid malicious use, then set the option "
                "`trust_remote_code=True` to remove this error.",
            ],
            category,
            permanent,
        )
        for heading, category, permanent in (
            (["restart 2:"], "remote_code", True),
            (["**Attempt #2:**"], "remote_code", True),
            (["second try:"], "remote_code", True),
            ([], "network", False),  # one paste: the earliest cause
        )
    ),
    # Hugging Face Spaces' runtime report of a Space stopped for its memory limit, as
    # OOMKilled (held-out AHZ, stop 62)
    (
        [
            "Loading pt checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
            "Memory limit exceeded (15Gi)",
        ],
        "oom",
        True,
    ),
    # a platform's sentence of a container ended with OOMKilled (held-out AIT: Azure
    # Container Apps' system log exported as CSV)
    (
        [
            "Loading pt checkpoint shards:  33% Completed | 1/3 [00:14<00:28, 14.22s/it]",
            '"11/27/2024, 3:21:53.144 PM",ContainerAppSystemLogs_CL,vicuna13b,vicuna13b--v2,,,'
            "Container 'vllm' was terminated with exit code '137' and reason 'OOMKilled'",
        ],
        "oom",
        True,
    ),
    (["Warning  BackOff  pod/vllm-0  container vllm was OOMKilled, restarting"], "oom", True),
    (["Task stopped: Essential container in task exited (OOMKilled)"], "oom", True),
    # vLLM's weight lock in the shared temporary folder, left by another user's start
    # (held-out AIW): the host's state, transient; a lock in a download folder stays
    # that folder's (storage-not-writable)
    (
        [
            '  File "/opt/conda/lib/python3.10/site-packages/filelock/_unix.py", line 39, in _acquire',
            "    fd = os.open(self.lock_file, open_flags, self._context.mode)",
            "PermissionError: [Errno 13] Permission denied: '/tmp/meta-llama-Llama-2-7b-chat-hf.lock'",
        ],
        "other",
        False,
    ),
    (
        [
            "PermissionError: [Errno 13] Permission denied: "
            "'/shared/hf/3e9c1f0ameta-llama-Meta-Llama-3-70B-Instruct.lock'",
        ],
        "other",
        True,
    ),
    # a terminal's time in brackets before every line (held-out AJC, a breach: read as
    # nothing at all), the shell's "Killed", then its prompt with what an orphan printed
    (
        [
            "[20:12:14] INFO 06-04 20:12:14 weight_utils.py:207] Using model weights format ['*.bin']",
            "",
            "[20:12:14] Killed",
            "",
            "[20:12:14] $ /usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: "
            "resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown",
        ],
        "other",
        False,
    ),
    # the loader of the logits processors a start names (--logits-processors): a class
    # that is no LogitsProcessor, and processors with speculative decoding (held-out AJZ:
    # the loader was not mined, read as other by where it was raised)
    (
        [
            'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/sample/logits_processor/'
            '__init__.py", line 118, in _load_logitsprocs_by_fqcns',
            "ValueError: JsonGuard must be a subclass of LogitsProcessor",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "ValueError: Custom logits processors are not supported when speculative "
            "decoding is enabled.",
        ],
        "bad_config",
        True,
    ),
    # an option structured output offers only with some backends, with another one
    # chosen (held-out AJZ: read as a requirement of the model)
    (
        [
            "ValueError: disable_any_whitespace is only supported for xgrammar and guidance backends."
        ],
        "bad_config",
        True,
    ),
    # a value rejected against the list vLLM accepts, named with it: the parser or
    # backend the user chose, wherever vLLM checks it (held-out ALE: the API server's own
    # check of its arguments, raised in validate_api_server_args, read as other)
    (
        [
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/'
            'api_server.py", line 1897, in validate_api_server_args',
            "    raise KeyError(",
            "KeyError: 'invalid tool call parser: hermes  (chose from { hermes,mistral,"
            "pythonic })'",
        ],
        "bad_config",
        True,
    ),
    (
        ["KeyError: 'invalid reasoning parser: deepseek-r1 (chose from { deepseek_r1,qwen3 })'"],
        "bad_config",
        True,
    ),
    (
        ["ValueError: Unknown Mamba SSU backend: tritonx. Valid options: triton, flashinfer"],
        "bad_config",
        True,
    ),
    # the API server's own socket and the port or host it was given (held-out ALH): a
    # port outside 0-65535 (any socket: the number was set), a port below 1024 refused
    # to a user that is not root (its traceback, or uvicorn's log line), and vLLM
    # 0.5-0.6.1's bind in run_server of a --host that names no address
    (
        [
            '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/'
            'entrypoints/openai/api_server.py", line 519, in create_server_socket',
            "(APIServer pid=1)     sock.bind(addr)",
            "(APIServer pid=1) OverflowError: bind(): port must be 0-65535.",
        ],
        "bad_config",
        True,
    ),
    (["OverflowError: getsockaddrarg: port must be 0-65535."], "bad_config", True),
    (
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/'
            'api_server.py", line 972, in create_server_socket',
            "    sock.bind(addr)",
            "PermissionError: [Errno 13] Permission denied",
        ],
        "bad_config",
        True,
    ),
    (
        [
            "INFO:     Waiting for application startup.",
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 443):"
            " permission denied",
        ],
        "bad_config",
        True,
    ),
    (
        [
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/'
            'api_server.py", line 476, in run_server',
            '    sock.bind((args.host or "", args.port))',
            "socket.gaierror: [Errno -2] Name or service not known",
        ],
        "bad_config",
        True,
    ),
    # the program that runs vLLM, the same on every start (held-out ALP): an event loop
    # started inside a running one (a notebook), an object pickle cannot hand to a
    # spawned process, and a compiler named by its versioned name (CC=/usr/bin/gcc-12)
    # that the image lacks
    (
        [
            "----> 7 asyncio.run(run_server(args))",
            "RuntimeError: asyncio.run() cannot be called from a running event loop",
        ],
        "other",
        True,
    ),
    (["RuntimeError: This event loop is already running"], "other", True),
    (
        [
            '  File "/usr/lib/python3.12/multiprocessing/reduction.py", line 60, in dump',
            "    ForkingPickler(file, protocol).dump(obj)",
            "AttributeError: Can't pickle local object 'main.<locals>.<lambda>'",
        ],
        "other",
        True,
    ),
    (["TypeError: cannot pickle '_thread.lock' object"], "other", True),
    # HF_HUB_ENABLE_HF_TRANSFER=1 without the package, as a handler logs the message alone
    # (held-out AMF: read as nothing at all)
    (
        [
            "2024-12-13T16:03:00.719Z [handler] engine init failed: Fast download using "
            "'hf_transfer' is enabled (HF_HUB_ENABLE_HF_TRANSFER=1) but 'hf_transfer' "
            "package is not available in your environment. Try `pip install hf_transfer`."
        ],
        "other",
        True,
    ),
    # HF_TOKEN with a trailing newline: the HTTP client refuses the header (held-out AME)
    (
        [
            "requests.exceptions.InvalidHeader: Invalid leading whitespace, reserved "
            "character(s), or return character(s) in header value: 'Bearer hf_*****\\n'"
        ],
        "gated_model",
        True,
    ),
    (
        ["h11._util.LocalProtocolError: Illegal header value b'Bearer hf_abc \\n'"],
        "gated_model",
        True,
    ),
    # a value an environment variable gives, converted where it is read (held-out ALY:
    # RunPod's worker-vllm reading MAX_MODEL_LEN=16k)
    (
        [
            '  File "/src/engine_args.py", line 120, in _env_args',
            '    "max_model_len": int(os.getenv("MAX_MODEL_LEN", 0)) or None,',
            "ValueError: invalid literal for int() with base 10: '16k'",
        ],
        "bad_config",
        True,
    ),
    (
        [
            '  File "/app/serve.py", line 14, in main',
            '    util = float(os.environ["GPU_MEMORY_UTILIZATION"])',
            "ValueError: could not convert string to float: '90%'",
        ],
        "bad_config",
        True,
    ),
    # a CUTLASS kernel not compiled for the GPU: a three-digit capability (Blackwell) is
    # newer than the image's build (other, as gpu-newer-than-image), a two-digit one older
    # than the kernel needs (the GPU's requirement; held-out ALX)
    (
        [
            "RuntimeError: No compiled cutlass_scaled_mm for a compute capability less than "
            "CUDA device capability: 120"
        ],
        "other",
        True,
    ),
    (
        [
            "RuntimeError: No compiled cutlass_scaled_mm for a compute capability less than "
            "CUDA device capability: 75"
        ],
        "model_requirement",
        True,
    ),
    (
        [
            "(EngineCore_DP0 pid=203) ERROR 09-16 15:31:49 [core.py:718] torch._inductor.exc."
            "InductorError: FileNotFoundError: [Errno 2] No such file or directory: "
            "'/usr/bin/gcc-12'",
        ],
        "other",
        True,
    ),
]


@pytest.mark.parametrize(
    ("lines", "category", "permanent"), WORDINGS, ids=[w[0][0][:60] for w in WORDINGS]
)
def test_wording_is_judged_on_its_evidence(lines, category, permanent):
    diagnosis = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert diagnosis.failed, "a failure paste must never read as a start under way"
    assert (str(diagnosis.category), diagnosis.permanent) == (category, permanent), diagnosis.rule


def test_transient_categories_are_never_permanent_in_the_pack():
    for rule in PACK.rules:
        if str(rule.category) in ("cuda_fault", "network"):
            assert not rule.permanent, rule.id


def test_a_platform_without_vllms_compiled_ops_warns_and_goes_on_loading():
    """TPU, CPU and Neuron builds have no vllm._C: the warning alone is no failure."""
    lines = [
        "WARNING 03-01 10:00:00 _custom_ops.py:20] Failed to import from vllm._C with "
        "ModuleNotFoundError(\"No module named 'vllm._C'\")",
        "INFO 03-01 10:00:05 model_runner.py:1000] Loading model weights took 14.9 GB",
    ]
    assert not classify_stream(io.BytesIO("\n".join(lines).encode()), PACK).failed


def test_a_parser_that_fails_a_request_after_ready_leaves_the_server_ready():
    """vLLM 0.6 builds its tool parser per request: a server that came up serves on."""
    lines = [
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        "ERROR 12-19 16:41:30 serving_chat.py:159] RuntimeError: Mistral Tool Parser could not "
        "locate the tool call token in the tokenizer!",
    ]
    diagnosis = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert str(diagnosis.state) == "ready"


def test_ray_serve_deploying_its_application_is_a_ready_marker():
    """Ray Serve says the replicas that built the engine pass their health checks: an
    error a replica printed before (a telemetry push) did not stop the start, and a
    failure after it is still read (held-out KW)."""
    lines = [
        "(ServeReplica:default:LLMDeployment pid=1855) INFO 05-14 09:23:06 "
        "[core_client.py:439] Core engine process 0 ready.",
        "(ServeReplica:default:LLMDeployment pid=1855) ERROR 2025-05-14 09:23:07,311 "
        "default_LLMDeployment 2mzq8n0p -- Failed to push telemetry: "
        "ConnectionError('Failed to connect to telemetry agent')",
        "2025-05-14 09:23:11,020\tINFO api.py:616 -- Deployed app 'default' successfully.",
    ]
    diagnosis = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert str(diagnosis.state) == "ready"
    assert classify_stream(io.BytesIO("\n".join(lines[:2]).encode()), PACK).failed
    later = [
        *lines,
        "ValueError: Total number of attention heads (32) must be divisible by "
        "tensor parallel size (3).",
    ]
    diagnosis = classify_stream(io.BytesIO("\n".join(later).encode()), PACK)
    assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)


def test_a_disk_short_warning_is_forgotten_when_the_weights_load():
    """huggingface_hub warned that the disk was short, and the download went on to the
    loading of the weights (space was freed): a start under way, not a failure."""
    lines = [
        "INFO 12-05 02:31:34 weight_utils.py:243] Using model weights format ['*.safetensors']",
        "UserWarning: Not enough free disk space to download the file. The expected file "
        "size is: 3983.54 MB. The target location /data/hub/blobs only has 1807.22 MB free "
        "disk space.",
        "model-00005-of-00011.safetensors: 100%|██████████| 3.98G/3.98G [00:41<00:00]",
        "INFO 12-05 02:36:01 model_runner.py:1077] Loading model weights took 38.7 GB",
    ]
    verdict = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert verdict.state is State.LOADING
    cut = classify_stream(io.BytesIO("\n".join(lines[:3]).encode()), PACK)
    assert (cut.rule, cut.permanent) == ("hub-disk-space-short", False)
    assert "1807.22 MB free" in (cut.cause or "")


def test_a_ray_get_timing_out_elsewhere_is_not_the_placement_group():
    """Ray's GetTimeoutError through another wait (a user's own ray.get) says nothing of
    the GPUs vLLM's parallelism asked for."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/srv/app.py", line 9, in run',
        "    ray.get(refs, timeout=60)",
        "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
    ]
    diagnosis = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert diagnosis.rule != "placement-group-timed-out"


def test_a_tokenizers_missing_attribute_is_the_repositorys_code_only_when_it_runs():
    """'X' object has no attribute 'y' on a tokenizer reads as the repository's code only
    where the start runs it (trust_remote_code, transformers_modules), and before ready."""
    error = "AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'"
    shown = "INFO 05-09 06:22:49 llm_engine.py:98] config: trust_remote_code=True"
    ran = classify_stream(io.BytesIO(f"{shown}\n{error}".encode()), PACK)
    assert (ran.rule, ran.permanent) == ("remote-code-tokenizer-broken", True)
    alone = classify_stream(io.BytesIO(error.encode()), PACK)
    assert alone.rule != "remote-code-tokenizer-broken"
    served = [shown, "INFO:     Application startup complete.", error]
    assert classify_stream(io.BytesIO("\n".join(served).encode()), PACK).state is State.READY


def test_a_persons_words_about_a_cuda_error_are_not_one():
    """The runtime's words have a colon, a code, a quoted reason or the source's place
    after "CUDA error"; a sentence about one (held-out WO) has none of them."""
    said = "not a CUDA error this time, it dies before touching the GPU:"
    assert classify_stream(io.BytesIO(said.encode()), PACK).category is None
    for printed in (
        "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'invalid argument'",
        "CUDA error 700 at /src/kernel.cu:41",
        "Cuda failure 'out of memory'",
    ):
        diagnosis = classify_stream(io.BytesIO(printed.encode()), PACK)
        assert diagnosis.category is not None and diagnosis.failed, printed


def test_a_liveness_probes_failures_are_no_kill_until_kubelet_restarts_the_container():
    """kubelet records each failed liveness probe as an event; it kills the container
    only at the probe's threshold, and says so ("failed liveness probe, will be
    restarted"). Failures alone, while the weights download: a start under way (held-out
    AAP)."""
    lines = [
        "  Warning  Unhealthy  2s (x37 over 5m52s)   kubelet  Liveness probe failed: Get "
        '"http://10.244.1.17:8000/health": dial tcp 10.244.1.17:8000: connect: connection '
        "refused",
        "INFO 04-22 09:15:11 [weight_utils.py:265] Using model weights format ['*.safetensors']",
        "model-00003-of-00030.safetensors:  37%|███▋      | 1.84G/4.97G [01:36<02:44, 19.0MB/s]",
    ]
    verdict = classify_stream(io.BytesIO("\n".join(lines).encode()), PACK)
    assert not verdict.failed
    killed = [
        *lines,
        "  Normal   Killing    4m2s (x3 over 16m)   kubelet  Container vllm failed liveness "
        "probe, will be restarted",
    ]
    verdict = classify_stream(io.BytesIO("\n".join(killed).encode()), PACK)
    assert (verdict.rule, verdict.permanent) == ("killed-by-liveness-probe", False)
