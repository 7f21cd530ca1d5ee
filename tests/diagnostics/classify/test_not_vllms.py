"""Lines that are not vLLM's own and say nothing of its start: a client's words that
vLLM's server could not be reached (a consequence, never the hub: held-out MV's trainer
that gave up before `trl vllm-serve` was up), and a Ray daemon's error forwarded to the
driver's console (Ray's disk filling, not vLLM's error: MV's rollout still loading), and
vLLM's request logger quoting a client's prompt or the model's answer (held-out WO: a
user asking about a "CUDA error: out of memory" in a prompt). Both paths."""

from __future__ import annotations

from diagnostics.model import Category, State
from tests.support.packs import both_paths

READY = [
    "INFO 05-06 17:42:44 [core_client.py:439] Core engine process 0 ready.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
]
CLIENT = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/home/user/grpo/train_grpo.py", line 88, in <module>',
    "[rank0]:     trainer = GRPOTrainer(",
    '[rank0]:   File "/srv/venv/lib/python3.11/site-packages/trl/extras/vllm_client.py", '
    "line 121, in check_server",
    "[rank0]:     raise ConnectionError(",
    "[rank0]: ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after 15 "
    "seconds. Make sure the server is running by running `trl vllm-serve`.",
]
LOADING = [
    "(WorkerDict pid=21) INFO 01-09 14:03:23 selector.py:115] Using XFormers backend.",
    "(WorkerDict pid=21) before init cache memory allocated: 8.93GB, reserved: 9.02GB",
]
DAEMON_ERROR = (
    "[2025-01-09 14:03:51,402 E 2150098 2150098] (raylet) file_system_monitor.cc:116: "
    "/tmp/ray/session_2025 is over 95% full, available space: 10.1 GB; capacity: 218.3 GB."
    " Object creation will fail if spilling is required."
)


def test_a_clients_word_that_vllms_server_was_unreachable_is_not_the_hub():
    assert both_paths([*READY, "", "### terminal 2", *CLIENT]).state is State.READY
    alone = both_paths(CLIENT)
    assert alone.category is not Category.NETWORK, alone.rule
    # in any case the client writes it
    shouted = [line.replace("vLLM server", "VLLM SERVER") for line in CLIENT]
    assert both_paths(shouted).category is not Category.NETWORK
    # the hub's own unreachable stays the network's
    hub = "ConnectionError: Couldn't reach 'https://huggingface.co' to load"
    assert both_paths([hub]).category is Category.NETWORK


def test_a_ray_daemons_error_is_not_vllms():
    daemon = both_paths([*LOADING, f"(raylet) {DAEMON_ERROR}"])
    assert daemon.state in (State.STARTING, State.LOADING), daemon.rule
    # the same error in the driver's own process is an error the start ended on
    assert both_paths([*LOADING, DAEMON_ERROR]).rule == "log-ends-after-error"


PROMPT = (
    "INFO 08-19 09:14:02 logger.py:36] Received request chat-5f0c1e7a: prompt: '<|begin_of_"
    'text|>user\\n\\nWhy does my job print "RuntimeError: CUDA error: out of memory" and then '
    '"Killed"? Traceback (most recent call last):\\n  File "train.py", line 88\\n'
    "OSError: [Errno 28] No space left on device', params: SamplingParams(n=1, "
    "temperature=0.7, max_tokens=1024), prompt_token_ids: [128000, 128006], lora_request: None."
)
ANSWER = (
    "INFO 08-19 09:14:12 [logger.py:71] Generated response chat-5f0c1e7a: output: 'Your GPU "
    "ran out: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', "
    "output_token_ids: [791, 22134], finish_reason: stop"
)


def test_a_logged_prompt_or_answer_is_a_clients_words_not_vllms():
    for line in (PROMPT, ANSWER):
        assert both_paths([*READY, line]).state is State.READY
        # the ready marker not kept: the words quoted name no cause of a failed start
        assert not both_paths([*LOADING, line]).failed
    # the same error printed by vLLM itself still is one
    assert both_paths([*READY, "torch.OutOfMemoryError: CUDA out of memory."]).failed
