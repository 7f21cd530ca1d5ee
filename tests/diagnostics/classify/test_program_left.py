"""vLLM's program ended before ready (a traceback of vLLM's code whose first frame is
the program's main: the `vllm` script, `python -m`'s runner): a ready marker after it,
before a new start of vLLM, is another program's in the same stream (an entrypoint
script's proxy, a tmux pane's other server: held-out MR, two failed starts read as
ready). Both paths: the file path's restart at the last ready marker must not skip the
failure before it."""

from __future__ import annotations

from diagnostics.model import State
from tests.support.packs import both_paths

START = [
    "INFO 03-27 10:02:15 [api_server.py:912] vLLM API server version 0.8.1",
    "INFO 03-27 10:02:15 [api_server.py:913] args: Namespace(subparser='serve', "
    "model_tag='/models/llama', model='/models/llama', port=8000)",
]
EXIT = [
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", '
    "line 274, in get_config",
    "    raise ValueError(error_message) from e",
    "ValueError: Invalid repository ID or local directory specified: '/models/llama'.",
]
PROXY_UP = [
    "INFO:     Started server process [27]",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:4000 (Press CTRL+C to quit)",
    'INFO:     10.42.3.1:51522 - "GET /health/liveliness HTTP/1.1" 200 OK',
]
MODULE_EXIT = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
    '  File "/srv/FastChat/fastchat/serve/vllm_worker.py", line 290, in <module>',
    '  File "/srv/venv/lib/python3.10/site-packages/vllm/engine/llm_engine.py", line 102, '
    "in __init__",
    "ImportError: This modeling file requires the following packages that were not found "
    "in your environment: tiktoken. Run `pip install tiktoken`",
]


def test_another_programs_ready_marker_after_vllm_ended_leaves_the_failure():
    lines = [*START, *EXIT, "", *PROXY_UP]
    assert both_paths(lines).state is State.FAILED_PERMANENT
    # after a filler longer than the file path's look-back, the same
    filler = [f"INFO 03-27 10:02:16 [logger.py:1] proxy line {n}" for n in range(3000)]
    assert both_paths([*START, *EXIT, *filler, *PROXY_UP]).failed


def test_a_program_run_as_a_module_ends_too_and_another_programs_arguments_start_nothing():
    fastchat_api = "args: Namespace(host='0.0.0.0', port=8000, controller_address='http://x')"
    lines = [*START[:1], *MODULE_EXIT, fastchat_api, *PROXY_UP]
    assert both_paths(lines).rule == "remote-code-package-missing"


def test_a_new_start_of_vllm_after_it_ended_is_its_own_again():
    assert both_paths([*START, *EXIT, *START, *PROXY_UP]).state is State.READY


def test_a_clients_traceback_is_not_vllm_ending():
    """A client run with ``python -m`` whose traceback holds no frame of vLLM's code
    ended itself, not vLLM."""
    client = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
        '  File "/srv/bench/client.py", line 9, in <module>',
        "ConnectionRefusedError: [Errno 111] Connection refused",
    ]
    assert both_paths([*START, *client, *PROXY_UP]).state is State.READY


# A cause of the best tiers (memory, a device fault) printed by the engine's process
# before the API server's traceback leaves the program: the file path, which reads
# only the lines that can change a verdict, still reads that traceback's frames
# (held-out PX: a sidecar's uvicorn up after vLLM failed, read as ready).
ENGINE_CAUSES = {
    "memory": "(EngineCore_0 pid=233) ERROR 09-03 02:14:29 [core.py:700] ValueError: Free "
    "memory on device (30.12/79.19 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory "
    "used by other processes.",
    "device": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "cause": "ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for "
    "now. Supported architectures: dict_keys(['LlamaForCausalLM'])",
}
API_EXIT = [
    "(APIServer pid=1) Traceback (most recent call last):",
    '(APIServer pid=1)   File "/usr/local/bin/vllm", line 10, in <module>',
    "(APIServer pid=1)     sys.exit(main())",
    "(APIServer pid=1)   ...",
    '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/'
    'utils.py", line 728, in wait_for_engine_startup',
    '(APIServer pid=1)     raise RuntimeError("Engine core initialization failed. "',
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause "
    "above. Failed core proc(s): {}",
]


def test_a_best_tier_cause_then_vllm_ending_then_another_programs_ready_marker():
    for name, cause in ENGINE_CAUSES.items():
        lines = [*START, cause, *API_EXIT, "", "$ kubectl logs pod -c sidecar", *PROXY_UP]
        assert both_paths(lines).failed, name
        assert both_paths([*START, cause, *API_EXIT, *START, *PROXY_UP]).state is State.READY
