"""Normalisation strips wrappers around vLLM's message, whatever produced them."""

from __future__ import annotations

import pytest

from diagnostics.classify.normalize import clean_raw, normalize

MSG = "ValueError: No available memory for the cache blocks."


@pytest.mark.parametrize(
    "raw",
    [
        f"{MSG}",
        f"(APIServer pid=1) ERROR 11-29 17:19:17 [core.py:866] {MSG}",
        f"(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866] {MSG}",
        f"\x1b[0;36m(EngineCore_DP0 pid=167)\x1b[0;0m \x1b[1;31mERROR\x1b[0m 02-28 16:12:13 [core.py:866] {MSG}",
        f"(Worker pid=12) ERROR 11-29 17:19:17 [multiproc_executor.py:1] {MSG}",
        f"(VllmWorker TP1 pid=9) ERROR 11-29 17:19:17 [multiproc_executor.py:1] {MSG}",
        f"(VllmWorker rank=1 pid=52940) ERROR 04-14 14:24:52 [multiproc_executor.py:383] {MSG}",
        f"(RayWorkerWrapper pid=67451, ip=10.1.0.7) ERROR 06-25 15:28:30 worker_base.py:148] {MSG}",
        # SkyPilot's task and multi-node prefixes (its fields comma-separated)
        f"(task, pid=4120) {MSG}",
        f"(worker1, rank=1, pid=1234, ip=10.0.0.2) ERROR 08-27 19:40:02 worker_base.py:148] {MSG}",
        f"(head, rank=0, pid=2345) {MSG}",
        # Ray Data's actor of a stage; torchrun's local-rank prefix (--tee)
        f"(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=2345, ip=10.0.0.3) {MSG}",
        f"[default0]:{MSG}",
        f"[default3]: {MSG}",
        f"[rank0]: {MSG}",
        f"ERROR 03-18 13:09:10 core.py:291] {MSG}",
        f"vllm-llm-1  | ERROR 03-18 13:09:10 [core.py:291] {MSG}",
        f"2025-03-07T05:56:27.270123456Z {MSG}",
        f"  | 2025-03-07T05:56:27.270Z | {MSG}",
        f"  | [2024-09-05T00:38:34Z] {MSG}",
        f"Nov 29 18:00:00 gpu-host vllm[123]: {MSG}",
        f"Aug 04  00:33:47.063 | {MSG}",
        # a terminal's or a recorder's time in brackets (held-out AJC), before vLLM's header
        f"[20:12:14] {MSG}",
        f"[20:12:14.512] (VllmWorkerProcess pid=9313) ERROR 06-04 20:12:14 worker.py:1] {MSG}",
        f"datgo1t12vudsh[info]{MSG}\\n",
        f"2024-07-03 16:48:32.457 [m6t1b8y3q0v5ec] [error] {MSG}",  # (held-out AJK)
        f"{MSG}\r\n",
        # a launcher's tag of its program, after its time, before a log line or an exception
        f"2024-08-28 11:02:27 [llm] {MSG}",
        f"[qwen-7b] ERROR 09-30 22:11:48 api_server.py:1] {MSG}",
        # ... and before its time (held-out ALQ: the frames under it went unread)
        f"[vllm] 2026-04-09 20:17:36 (EngineCore_DP0 pid=402) ERROR 04-09 20:17:36 [core.py:902] {MSG}",
        f"[vllm] 20:17:36 {MSG}",
        # a log tailer's pod and container names (stern), before a process's prefix or
        # vLLM's header
        f"decode-7f6c9d-0 vllm (EngineCore_DP0 pid=175) ERROR 01-29 12:05:49 [core.py:866] {MSG}",
        f"decode-7f6c9d-0 vllm (EngineCore_DP0 pid=175) {MSG}",
        f"vllm-0 ERROR 01-29 12:05:49 [core.py:866] {MSG}",
        # ... and before a traceback's own lines: its header and its exception line
        f"vllm-7b-5f7d9c6b8-qjx2m vllm {MSG}",
        # a Kaggle notebook's log export: seconds since the start, the line's number
        f"74.6s\t6\t{MSG}",
        # DJL Serving (SageMaker's LMI containers) tagging its Python process's output
        f"WARN  PyProcess W-127-model-stderr: {MSG}",
        f"2024-09-05T16:23:13.922+00:00\tINFO  PyProcess W-218-model-stdout: ERROR 09-05 "
        f"16:23:13 worker_base.py:145] {MSG}",
    ],
)
def test_prefixes_are_stripped(raw):
    assert normalize(raw) == MSG


def test_a_tailers_prefix_before_a_traceback_is_stripped():
    pod = "vllm-7b-5f7d9c6b8-qjx2m vllm "
    assert normalize(pod + "Traceback (most recent call last):") == (
        "Traceback (most recent call last):"
    )
    frame = '  File "/x/vllm/attention/selector.py", line 88, in _which_attn_to_use'
    assert normalize(pod + frame) == frame


def test_traceback_indentation_is_kept():
    line = (
        '(EngineCore pid=5) ERROR 11-29 17:19:17 [core.py:1]   File "/x/vllm/models/a.py", line 3'
    )
    assert normalize(line) == '  File "/x/vllm/models/a.py", line 3'
    assert normalize("WARN  PyProcess W-127-model-stderr:     raise RuntimeError(") == (
        "    raise RuntimeError("
    )


def test_clean_raw_keeps_prefixes_but_not_colours():
    assert clean_raw("\x1b[0;36m(APIServer pid=1)\x1b[0;0m hi\r\n") == "(APIServer pid=1) hi"


@pytest.mark.parametrize(
    "line",
    [
        "[shutdown] API server: shutdown triggered",  # vLLM's own in-band tag (a phase)
        "[c10d] The client socket has failed to connect to [localhost]:29500",
        "[Gloo] Rank 0 is connected to 1 peer ranks.",
        # words before a process named with its pid are the message's, not a tailer's
        "Killing process tree (EngineCore_DP0 pid=175)",
        "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
        # words before an exception's name in a sentence are kept when more than two
        "The engine raised ValueError: bad value",
    ],
)
def test_an_in_band_tag_is_kept(line):
    """A tag is a launcher's only before what reads as a log line or a traceback's."""
    assert normalize(line) == line


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        # CloudWatch Logs Insights' CSV: the time field, the message's cell quoted with
        # its quotes doubled (when it holds a quote or a comma), else bare
        (f'2024-08-14 18:20:49.660,"{MSG.replace(".", ", x.")}"', MSG.replace(".", ", x.")),
        (f"2024-08-14 18:20:49.660,{MSG}", MSG),
        (
            '2024-08-14 18:20:49.660,"INFO:     10.0.0.2:48210 - ""GET /ping HTTP/1.1"" 404 '
            'Not Found"',
            '10.0.0.2:48210 - "GET /ping HTTP/1.1" 404 Not Found',
        ),
        # Kibana's and Azure Log Analytics' time fields, and the short fields they put
        # before the message (host, pod, container; quoted or not), and after it
        (f'"Mar 27, 2025 @ 18:44:14.840",gemma-0,{MSG}', MSG),
        (f'"3/12/2025, 10:32:56.636 AM",aks-node-1,pod-7,vllm,"{MSG}",stderr', MSG),
        (f'"2025-05-06T13:44:52.234Z","ip-10-20-7-143.ec2.internal","vllm","error","{MSG}"', MSG),
        # Splunk's: the source field a container's log path (longer than the message)
        (
            '"2025-06-18T07:23:30.539+0000","ip-10-42-7-118.ec2.internal","/var/log/containers/'
            + "vllm-6d8f9c7b5-2xq7m_inference_vllm-"
            + "3f2a9c81d7e64b05" * 4
            + '.log",'
            + f'"kube:container:vllm","{MSG}"',
            MSG,
        ),
        # logging's milliseconds after a comma are not a CSV field
        ("2024-08-14 18:20:49,660 - vllm - INFO - up", "up"),
    ],
)
def test_a_csv_exports_time_field_and_quoted_cell_are_taken_off(raw, text):
    assert normalize(raw) == text


def test_an_access_line_in_a_csv_export_is_the_servers_answer():
    """A health check's 404 in a CSV export (newest first) of a server that came up is
    a client's request answered, not the hub's answer (held-out MO)."""
    from diagnostics import classify_lines
    from diagnostics.model import State

    lines = [
        "@timestamp,@message",
        '2024-08-14 18:20:49.660,"INFO:     10.0.0.2:48210 - ""GET /ping HTTP/1.1"" 404 Not Found"',
        "2024-08-14 18:20:47.660,INFO:     Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)",
        "2024-08-14 18:20:46.341,INFO 08-14 18:20:46 model_runner.py:1225] Graph capturing finished in 16 secs.",
    ]
    assert classify_lines(lines[:1] + lines[:0:-1]).state is State.READY
