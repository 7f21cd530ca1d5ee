"""A log of several compose services: another service's lines are not vLLM's
(diagnostics.classify.services), through both paths."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths

VLLM = "vllm-1        | "
UI = "open-webui-1  | "
START = [
    f"{VLLM}INFO 10-17 06:12:44 [api_server.py:1839] vLLM API server version 0.11.0",
    f"{VLLM}(APIServer pid=1) INFO 10-17 06:12:50 [model.py:547] Resolved architecture: X",
]
FAILURE = [
    f"{VLLM}(APIServer pid=1) Traceback (most recent call last):",
    f"{VLLM}(APIServer pid=1)   Value error, User-specified max_model_len (200000) is greater "
    "than the derived max_model_len (max_position_embeddings=131072 or model_max_length=None "
    "in model's config.json). [type=value_error, input_value=ArgsKwargs(()), "
    "input_type=ArgsKwargs]",
]
UI_UP = [
    f"{UI}INFO:     Application startup complete.",
    f"{UI}INFO:     Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)",
]
UI_CANNOT_CONNECT = (
    f"{UI}2025-10-17 06:13:31.502 | ERROR    | open_webui.routers.openai:send_get_request:90 - "
    "Connection error: Cannot connect to host vllm:8000 ssl:default [Name or service not known]"
)


@pytest.mark.parametrize("exit_line", [[], ["vllm-1 exited with code 1"]], ids=["cut", "exit"])
def test_another_services_ready_and_errors_are_not_vllms(exit_line):
    lines = [*START, *FAILURE, *UI_UP, UI_CANNOT_CONNECT, *exit_line]
    diagnosis = both_paths(lines)
    assert (diagnosis.rule, diagnosis.state) == (
        "max-model-len-above-model-limit",
        State.FAILED_PERMANENT,
    )


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("exit_line", [[], ["vllm-1 exited with code 1"]], ids=["cut", "exit"])
def test_the_rest_of_another_services_line_cut_at_a_width_is_that_services(width, exit_line):
    """A terminal cut every line at its width: the gutter is on each line's first part
    only, and the web UI's "[Name or service not known]" is the rest of its line, not a
    line of vLLM's (held-out AMQ, wrapped at 80: the UI's words beat vLLM's cause)."""
    lines = [*START, *FAILURE, *exit_line, *UI_UP, UI_CANNOT_CONNECT]
    cut = [line[i : i + width] for line in lines for i in range(0, len(line), width)]
    assert cut[-1].startswith("ult [Name") if width == 80 else True
    diagnosis = both_paths(cut)
    assert (diagnosis.rule, diagnosis.state) == (
        "max-model-len-above-model-limit",
        State.FAILED_PERMANENT,
    )


def test_one_instance_of_a_scaled_service_up_does_not_clear_anothers_failure():
    """`docker compose --scale` runs several containers of one service, each under its
    own instance number ("replica-0", "replica-2"): two vLLM servers, as two services
    (held-out ANL: one replica read a shard another left cut, and a third came up)."""
    failed = [line.replace(VLLM, "vllm-2  | ") for line in [*START, *FAILURE]]
    up = [line.replace(UI, "vllm-0  | ") for line in UI_UP]
    diagnosis = both_paths([*failed, "vllm-2 exited with code 1", *up])
    assert (diagnosis.rule, diagnosis.state) == (
        "max-model-len-above-model-limit",
        State.FAILED_PERMANENT,
    )


def _coloured(line: str, colour: str) -> str:
    """``line`` as compose prints it on a terminal: its service's name and gutter in
    colour (a paste that kept the codes)."""
    name, bar, rest = line.partition("| ")
    return f"\x1b[{colour}m{name}|\x1b[0m {rest}" if bar else f"\x1b[{colour}m{line}\x1b[0m"


@pytest.mark.parametrize("exit_line", [[], ["vllm-1 exited with code 1"]], ids=["cut", "exit"])
def test_services_are_told_apart_with_compose_colours_kept(exit_line):
    """(held-out ZN: the web UI's "Name or service not known" after vLLM exited on a repo
    that does not exist was the verdict while the colour codes hid the services' names)"""
    vllm = [_coloured(line, "36") for line in [*START, *FAILURE, *exit_line]]
    ui = [_coloured(line, "33") for line in [*UI_UP, UI_CANNOT_CONNECT]]
    diagnosis = both_paths([*vllm, *ui])
    assert diagnosis.rule == "max-model-len-above-model-limit"


def test_another_services_exit_is_not_vllms():
    """compose's own report that another service exited (an eval client that died on its
    requests' answers) says nothing of vLLM's start, which came up; vLLM's own exit does."""
    ready = [*START, f"{VLLM}INFO:     Application startup complete."]
    diagnosis = both_paths([*ready, "eval-1 exited with code 1"])
    assert diagnosis.state is State.READY
    assert both_paths([*ready, "vllm-1 exited with code 1"]).failed


def test_a_second_vllm_service_is_vllms_too():
    other = "vllm-small-1  | "
    lines = [
        *START,
        f"{VLLM}INFO:     Application startup complete.",
        f"{other}INFO 10-17 06:14:00 [api_server.py:1839] vLLM API server version 0.11.0",
        f"{other}ValueError: Free memory on device (10.0/79.2 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 71.3 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes.",
        UI_CANNOT_CONNECT,
    ]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.permanent) == ("oom", False)


CHAT = "vllm-chat-1   | "
EMBED = "vllm-embed-1  | "
CHAT_FAILS = [
    f"{CHAT}INFO 07-14 09:12:07 [api_server.py:1395] vLLM API server version 0.9.2",
    f"{CHAT}ERROR 07-14 09:12:27 [core.py:586] ValueError: Free memory on device "
    "(69.63/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 "
    "GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    "vllm-chat-1 exited with code 1",
]
EMBED_UP = [
    f"{EMBED}INFO 07-14 09:12:07 [api_server.py:1395] vLLM API server version 0.9.2",
    f"{EMBED}INFO 07-14 09:12:33 [api_server.py:1457] Starting vLLM API server 0 on "
    "http://0.0.0.0:8001",
    f"{EMBED}INFO:     Application startup complete.",
]
CHAT_UP = [
    f"{CHAT}INFO 07-14 09:13:07 [api_server.py:1395] vLLM API server version 0.9.2",
    f"{CHAT}INFO:     Application startup complete.",
]


@pytest.mark.parametrize(
    ("lines", "state"),
    [
        # one vLLM service up does not clear another's failure, before it or after it
        ([*CHAT_FAILS, *EMBED_UP], State.FAILED_TRANSIENT),
        ([*EMBED_UP, *CHAT_FAILS], State.FAILED_TRANSIENT),
        # the failed service itself restarted and up: the log is up
        ([*CHAT_FAILS, *EMBED_UP, *CHAT_UP], State.READY),
        # one service: up after its failure is up, as ever
        ([*CHAT_FAILS, *CHAT_UP], State.READY),
    ],
    ids=["other-up-after", "other-up-before", "failed-one-up-again", "one-service"],
)
def test_one_vllm_services_ready_marker_does_not_clear_anothers_failure(lines, state):
    diagnosis = both_paths(lines)
    assert diagnosis.state is state, diagnosis
    if state is State.FAILED_TRANSIENT:
        assert diagnosis.rule == "gpu-free-memory-below-utilization"


def test_a_vllm_services_exit_is_its_own_though_another_comes_up_after_it():
    """(held-out ZW: one vLLM service killed with 137 while loading, compose's report of
    its exit its only end, the other vLLM service up after it)"""
    loading = "Loading safetensors checkpoint shards:  33% Completed | 1/3"
    lines = [CHAT_FAILS[0], loading, "vllm-chat-1 exited with code 137", *EMBED_UP]
    assert both_paths(lines).rule == "process-sigkilled"


def test_before_vllm_shows_itself_and_in_one_service_nothing_is_left_out():
    # a paste of one service's lines only, vLLM's header never shown
    lines = [f"{UI}INFO:     Application startup complete."]
    assert both_paths(lines).state is State.READY


def test_a_pastes_line_numbers_are_not_service_names():
    """ "12 | ..." is a line number (the normaliser removes it), not a service."""
    lines = [f"{n} | {line[len(VLLM) :]}" for n, line in enumerate([*START, *FAILURE], 12)]
    diagnosis = both_paths(lines)
    assert diagnosis.rule == "max-model-len-above-model-limit"


@pytest.mark.parametrize(
    "paste", ["    ", "\t", "> ", "    > "], ids=["indent", "tab", "quote", "both"]
)
def test_services_are_told_apart_under_what_a_paste_puts_before_every_line(paste):
    """A Markdown code block's indent and a reply's quote markers before every line: the
    service names under them still say whose line it is."""
    lines = [paste + line for line in [*CHAT_FAILS, *EMBED_UP]]
    diagnosis = both_paths(lines)
    assert diagnosis.state is State.FAILED_TRANSIENT, diagnosis
    assert diagnosis.rule == "gpu-free-memory-below-utilization"


def test_services_are_told_apart_with_the_time_compose_puts_after_the_gutter():
    """`docker compose logs --timestamps`: each line's time after its service's gutter."""
    time = "2025-06-18T09:12:01.387841082Z "
    lines = [
        line.replace(" | ", " | " + time, 1) if " | " in line else line
        for line in [*CHAT_FAILS, *EMBED_UP]
    ]
    diagnosis = both_paths(lines)
    assert diagnosis.state is State.FAILED_TRANSIENT, diagnosis
    assert diagnosis.rule == "gpu-free-memory-below-utilization"


def tagged(tag: str, lines: list[str]) -> list[str]:
    """Compose lines re-tagged the way a launcher prints them: ``[tag] line``."""
    return [f"[{tag}] {line.split('| ', 1)[1]}" if "| " in line else line for line in lines]


@pytest.mark.parametrize(
    ("chat", "embed"),
    [("chat", "embed"), ("pod/vllm-chat-0/vllm", "pod/vllm-embed-0/vllm")],
    ids=["launcher", "kubectl-prefix"],
)
def test_services_tagged_in_brackets_are_told_apart(chat, embed):
    """A launcher running two servers (or kubectl logs --prefix) tags each line with its
    program in brackets: one server up does not clear the other's failure."""
    fails = [*tagged(chat, CHAT_FAILS[:-1]), f"[start] {chat} exited with status 1"]
    for lines in ([*fails, *tagged(embed, EMBED_UP)], [*tagged(embed, EMBED_UP), *fails]):
        diagnosis = both_paths(lines)
        assert diagnosis.state is State.FAILED_TRANSIENT, diagnosis
        assert diagnosis.rule == "gpu-free-memory-below-utilization"
    # the failed server restarted and up: the log is up
    up_again = [*fails, *tagged(embed, EMBED_UP), *tagged(chat, CHAT_UP)]
    assert both_paths(up_again).state is State.READY


def test_a_stream_tag_and_a_rank_prefix_are_not_services():
    """``[stdout]``/``[stderr]`` tag one program's two streams (its traceback on stderr is
    its own); ``[rank0]:`` is a rank's prefix."""
    lines = [
        "[stdout] INFO 07-14 09:12:07 [api_server.py:1395] vLLM API server version 0.9.2",
        "[stderr] Traceback (most recent call last):",
        "[stderr] ValueError: Free memory on device (69.63/79.19 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes.",
    ]
    assert both_paths(lines).rule == "gpu-free-memory-below-utilization"
    ranks = [
        line.replace("[stdout] ", "[rank0]: ").replace("[stderr] ", "[rank0]: ") for line in lines
    ]
    assert both_paths(ranks).rule == "gpu-free-memory-below-utilization"


def test_honcho_and_foreman_services_after_their_time_are_told_apart():
    """Procfile runners print the time before the service's name ("14:06:08 vllm.1   | ")."""
    lines = [f"14:06:{n:02} {line}" for n, line in enumerate([*CHAT_FAILS[:-1], *EMBED_UP])]
    diagnosis = both_paths(lines)
    assert diagnosis.state is State.FAILED_TRANSIENT, diagnosis
    assert diagnosis.rule == "gpu-free-memory-below-utilization"


def test_a_launchers_tags_after_its_timestamps_are_services_and_their_lines_read():
    """A launcher printing its time, then the program's tag: another program's ready
    marker does not clear vLLM's failure, and the tag does not hide the exception line
    from the rules that read it at the line's start."""
    lines = [
        "2024-08-28 11:02:15 [llm] INFO 08-28 11:02:15 api_server.py:440] vLLM API server "
        "version 0.5.5",
        "2024-08-28 11:02:16 [rerank] INFO     2024-08-28 11:02:16,502 infinity_emb INFO: go",
        "2024-08-28 11:02:27 [llm] Traceback (most recent call last):",
        "2024-08-28 11:02:27 [llm] AttributeError: module 'torch._C' has no attribute "
        "'_cuda_setDevice'",
        "2024-08-28 11:02:28 [rerank] INFO:     Uvicorn running on http://0.0.0.0:8002 (Press "
        "CTRL+C to quit)",
        "2024-08-28 11:02:37 [llm] ERROR 08-28 11:02:37 api_server.py:171] RPCServer process "
        "died before responding to readiness probe",
    ]
    diagnosis = both_paths(lines)
    assert (diagnosis.rule, diagnosis.state) == ("broken-environment", State.FAILED_PERMANENT)


@pytest.mark.parametrize(("rc", "rule"), [("-9", "process-sigkilled"), ("1", "engine-wrapper")])
def test_a_procfile_runners_own_report_of_the_exit_is_read(rc, rule):
    """honcho's and foreman's own lines ("system | vllm.1 stopped (rc=-9)") are about the
    services, kept as compose's own lines are."""
    lines = [
        "14:07:32 web.1    | [2024-03-12 14:07:32 +0000] [9921] [INFO] Starting gunicorn",
        "14:07:41 vllm.1   | INFO 03-12 14:07:41 llm_engine.py:87] Initializing an LLM engine",
        "14:07:49 vllm.1   | INFO 03-12 14:07:49 weight_utils.py:163] Using model weights",
        f"14:09:58 system   | vllm.1 stopped (rc={rc})",
        "14:09:58 system   | sending SIGTERM to web.1 (pid 9921)",
    ]
    diagnosis = both_paths(lines)
    assert diagnosis.failed, diagnosis
    assert diagnosis.rule == rule


def test_a_service_whose_paste_begins_at_vllms_traceback_is_vllms():
    """vLLM's header never shown (the paste begins at its traceback): a frame in vLLM's
    own code says whose service it is, so the web UI's ready marker is not vLLM's."""
    vllm = "vllm  | "
    lines = [
        f"{vllm}Traceback (most recent call last):",
        f'{vllm}  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/'
        'cli_args.py", line 262, in validate_parsed_serve_args',
        f"{vllm}    raise TypeError(",
        f"{vllm}TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
        "vllm exited with code 1",
        *UI_UP,
    ]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)


@pytest.mark.parametrize(
    ("usage", "error"),
    [
        (
            "usage: api_server.py [-h] [--host HOST] [--port PORT]",
            "api_server.py: error: argument --dtype: invalid choice: 'fp16' (choose from "
            "'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')",
        ),
        (
            "usage: vllm serve [model_tag] [options]",
            "vllm serve: error: argument --dtype: invalid choice: 'fp16' (choose from "
            "'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')",
        ),
    ],
)
def test_a_service_that_ended_at_vllms_command_line_is_vllms(usage, error):
    """A start that ended at its command line printed only argparse's usage and error:
    those say whose service it is, so a proxy's ready marker after it is not vLLM's."""
    vllm = "vllm-1  | "
    lines = [f"{vllm}{usage}", f"{vllm}{error}", "vllm-1 exited with code 2", *UI_UP]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)


def test_vllm_relayed_by_another_programs_logger_is_vllms():
    """FastChat's worker relays vLLM's lines under its own logger's fields ("date | INFO |
    stdout | "): its service is vLLM's, and the API server that comes up after it failed
    is another's (held-out LX)."""
    worker, api = "fastchat-vllm-worker-1   | ", "fastchat-api-server-1    | "
    relay = "2024-03-11 08:14:14 | ERROR | stderr | "
    lines = [
        f"{worker}2024-03-11 08:14:13 | INFO | stdout | INFO 03-11 08:14:13 llm_engine.py:87] "
        "Initializing an LLM engine with config: model='Qwen/Qwen-14B-Chat'",
        f"{worker}{relay}Traceback (most recent call last):",
        f'{worker}{relay}  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/'
        'llm_engine.py", line 116, in __init__',
        f"{worker}{relay}ImportError: This modeling file requires the following packages "
        "that were not found in your environment: tiktoken. Run `pip install tiktoken`",
        "fastchat-vllm-worker-1 exited with code 1",
        f"{api}2024-03-11 08:14:15 | ERROR | stderr | INFO:     Uvicorn running on "
        "http://0.0.0.0:8000 (Press CTRL+C to quit)",
    ]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("remote_code", State.FAILED_PERMANENT)


def test_a_service_named_for_vllm_is_vllms_though_its_tail_shows_no_vllm_line():
    """`docker compose logs --tail 4`: vLLM's last lines show none of its own (no logger
    header, no vLLM frame), only the port in use; the web UI's server up on that port
    after vLLM exited is the web UI's. A service named for vLLM is vLLM's."""
    lines = [
        "vllm        |     sock.bind(addr)",
        "vllm        | OSError: [Errno 98] Address already in use",
        "vllm exited with code 1",
        "open-webui  | INFO:     Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)",
    ]
    diagnosis = both_paths(lines)
    assert diagnosis.failed and str(diagnosis.category) == "other"
    # another service's name: its ready marker still counts when vLLM's is unknown
    renamed = [
        line.replace("vllm  ", "model ").replace("vllm exited", "model exited") for line in lines
    ]
    assert not both_paths(renamed).failed


# Two servers of one launcher tagged by GNU parallel (--tag: the argument, a tab, the
# line): the second's ready marker says nothing of the first's failure (held-out WD, stop
# 53; each in a file of its own under tail's headers: test_sections.py).
GATED = [
    "INFO 01-08 13:05:11 api_server.py:712] vLLM API server version 0.6.6.post1",
    "Traceback (most recent call last):",
    '  File "/srv/venv/lib/python3.11/site-packages/huggingface_hub/utils/_http.py", line 423, '
    "in hf_raise_for_status",
    "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-677e)",
    "",
    "Cannot access gated repo for url https://huggingface.co/mistralai/M-7B/resolve/main/"
    "config.json.",
]
UP = [
    "INFO 01-08 13:05:11 api_server.py:712] vLLM API server version 0.6.6.post1",
    "INFO 01-08 13:05:50 llm_engine.py:431] init engine (profile, create kv cache, warmup "
    "model) took 17.85 seconds",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://127.0.0.1:9001 (Press CTRL+C to quit)",
]


def test_gnu_parallels_tags_are_services():
    lines = [
        *(f"openchat\t{line}" for line in UP[:1]),
        *(f"mistral\t{line}" for line in GATED),
        *(f"openchat\t{line}" for line in UP[1:]),
    ]
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("gated_model", State.FAILED_PERMANENT)
    assert both_paths([f"openchat\t{line}" for line in UP]).state is State.READY
