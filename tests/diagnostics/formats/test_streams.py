"""Logs in a container runtime's JSON format are read as the lines they hold
(diagnostics.formats.streams), whole logs and block by block."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.formats.pastes import _GAPS, _doubled_gaps
from diagnostics.formats.streams import MAX_LINE, decoded
from diagnostics.pack.rules import load_pack
from diagnostics.scanning.scan import classify_stream
from tests.support import tiers

LINES = [
    "INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.0",
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
    "that can be stored in KV cache (20000). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine.",
]


def _docker(lines: list[str]) -> bytes:
    rows = [
        {"log": f"{line}\n", "stream": "stderr", "time": "2024-05-01T12:00:00Z"} for line in lines
    ]
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _read_all(data: bytes, block: int) -> bytes:
    stream = io.BytesIO(data)
    first, reader = decoded(stream.read(block), stream, block)
    out = [first]
    while chunk := reader.read(block):
        out.append(chunk)
    return b"".join(out)


def test_a_docker_json_log_is_read_as_its_lines_in_any_block_size():
    expected = "".join(f"{line}\n" for line in LINES).encode()
    for block in (7, 64, 1 << 16):
        assert _read_all(_docker(LINES), block) == expected


def test_a_docker_json_log_is_diagnosed_like_the_plain_one():
    pack = load_pack()
    plain = classify_stream(io.BytesIO("\n".join(LINES).encode()), pack)
    assert classify_stream(io.BytesIO(_docker(LINES)), pack) == plain
    assert plain.rule is not None and str(plain.category) == "kv_cache"


def test_lines_that_are_not_json_objects_pass_as_they_are():
    data = _docker(LINES[:1]) + b"not json at all\n" + b'{"log": 3}\n' + b'{"log": "x\n'
    assert _read_all(data, 64) == (
        LINES[0].encode() + b"\nnot json at all\n" + b'{"log": 3}\n' + b'{"log": "x\n'
    )


def test_a_plain_log_that_mentions_log_keys_is_left_alone():
    data = b'INFO {"log": "x"} is not the format\n{"log": "y\\n"}\n'
    assert _read_all(data, 64) == data


def test_a_json_line_longer_than_the_line_limit_passes_undecoded():
    long_line = json.dumps({"log": "x" * (MAX_LINE + 10)}).encode() + b"\n"
    data = _docker(LINES[:1]) + long_line
    out = _read_all(data, 1 << 16)
    assert out.startswith(LINES[0].encode() + b"\n")
    assert len(out) == len(LINES[0]) + 1 + len(long_line)


def test_a_structured_loggers_json_lines_are_read_by_their_message():
    rows = [{"severity": "ERROR", "message": line} for line in LINES]
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    assert _read_all(data, 64) == "".join(f"{line}\n" for line in LINES).encode()


def _rows(rows: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def test_a_collectors_export_is_read_by_the_field_that_holds_the_line():
    """Loki's (logcli --output=jsonl: "line"), and the exports that nest the record under
    one key: Datadog's ("attributes", "content"), Google Cloud's structured entries
    ("jsonPayload"), Elasticsearch's hits ("_source")."""
    expected = "".join(f"{line}\n" for line in LINES).encode()
    shapes = [
        lambda line: {"labels": {"pod": "p"}, "line": line, "timestamp": "2025-01-01T00:00:00Z"},
        lambda line: {"id": "A", "type": "log", "attributes": {"message": line, "status": "x"}},
        lambda line: {"id": "A", "content": {"message": line, "tags": ["env:x"]}},
        lambda line: {"insertId": "i", "jsonPayload": {"message": line}, "severity": "ERROR"},
        lambda line: {"_index": "logs", "_source": {"log": line, "stream": "stderr"}},
    ]
    for shape in shapes:
        assert _read_all(_rows([shape(line) for line in LINES]), 64) == expected


# A start that came up, each record stamped by the collector; the text has no times of
# its own a reader could order it by.
_CAME_UP = [
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    'INFO:     10.0.0.1:50616 - "GET /health HTTP/1.1" 200 OK',
    'INFO:     10.0.0.1:50617 - "GET /health HTTP/1.1" 200 OK',
]
_UP_AND_LOADING = [
    "INFO 02-11 12:24:01 model_runner.py:1] Starting to load model m...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
    *_CAME_UP,
]


def _stamped(lines: list[str], stamp: Callable[[int], dict[str, object]]) -> bytes:
    """``lines`` as Loki's records, record n stamped ``stamp(n)``."""
    rows = [{"labels": {"pod": "p"}, "line": line, **stamp(n)} for n, line in enumerate(lines)]
    return _rows(rows)


def _iso(n: int) -> dict[str, object]:
    return {"timestamp": f"2025-02-11T13:24:{n:02d}.000000000Z"}


def _millis(n: int) -> dict[str, object]:  # CloudWatch's
    return {"timestamp": 1739280240000 + n}


def test_an_export_listing_the_newest_record_first_is_read_by_its_records_times():
    pack = load_pack()
    newest_first = list(reversed(_UP_AND_LOADING))
    for stamp in (_iso, _millis):
        oldest_first = classify_stream(io.BytesIO(_stamped(_UP_AND_LOADING, stamp)), pack)
        assert str(oldest_first.state) == "ready"
        newest = _stamped(newest_first, lambda n, stamp=stamp: stamp(50 - n))
        assert str(classify_stream(io.BytesIO(newest), pack).state) == "ready"
    # the same records without times, or with times that do not compare: read as given
    unordered = _stamped(newest_first, lambda n: {})
    assert str(classify_stream(io.BytesIO(unordered), pack).state) != "ready"
    mixed = _stamped(newest_first, lambda n: _iso(50 - n) if n % 2 else _millis(50 - n))
    assert str(classify_stream(io.BytesIO(mixed), pack).state) != "ready"


def _screenshot(line: str) -> str:
    """A line as a screenshot's text (OCR) gives it: gaps doubled, a space before a colon
    or comma."""
    return line.replace(": ", " : ").replace(", ", " , ").replace(" ", "  ")


def test_a_screenshots_text_with_doubled_gaps_is_read_single_spaced():
    """Held-out QE: a failed start pasted from a screenshot's text matched no pattern and
    read as a start under way."""
    pack = load_pack()
    lines = [
        *LINES,
        'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", '
        "line 528, in check_enough_kv_cache_memory",
        "CRITICAL 05-01 12:00:09 [core_client.py:361] Got fatal signal from worker "
        "processes, shutting down. See stack trace above for root cause issue.",
    ]
    plain = classify_stream(io.BytesIO("\n".join(lines).encode()), pack)
    ocr = "\n".join(_screenshot(line) for line in lines).encode()
    assert _read_all(ocr, 4096).count(b"  ") < ocr.count(b"  ") / 10
    read = classify_stream(io.BytesIO(ocr), pack)
    assert (read.rule, read.state) == (plain.rule, plain.state)
    assert read.evidence is not None and read.evidence.line == 2


def test_a_log_with_some_doubled_gaps_is_left_alone():
    compose = [f"vllm-1  | {line}" for line in LINES] * 20
    data = "\n".join(compose).encode()
    assert _read_all(data, 1 << 16) == data


@given(st.binary(max_size=40).map(lambda b: bytes(b" ab\t\n"[x % 5] for x in b)))
@settings(max_examples=tiers.examples(400), deadline=None)
def test_the_doubled_gap_count_is_the_regex_count(data):
    """The OCR check's count of doubled gaps, found from the gaps, is the count of the
    non-overlapping matches it replaces."""
    assert _doubled_gaps(data) == len(_GAPS[0].findall(data))


_ESCAPED_LINES = [
    "INFO 08-21 22:14:40 api_server.py:339] vLLM API server version 0.5.4",
    "INFO 08-21 22:14:40 api_server.py:340] args: Namespace(model='microsoft/Phi-3.5-MoE-"
    "instruct', trust_remote_code=True, tensor_parallel_size=2)",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/arg_utils.py", line 762, in '
    "create_engine_config",
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/models/__init__.py", '
    "line 186, in _raise_for_unsupported",
    "    raise ValueError(",
    "ValueError: Model architectures ['PhiMoEForCausalLM'] are not supported for now. "
    "Supported architectures: ['LlamaForCausalLM', 'MixtralForCausalLM', 'Phi3ForCausalLM']",
]


@pytest.mark.parametrize("quoted", [False, True])
def test_an_html_escaped_paste_is_read_as_the_log_it_escapes(quoted):
    """A page's source or an e-mail (&quot;, &#39;, a reply's "&gt; " quote marker; held-
    out SE): read as the log it escapes, in any block size."""
    import html

    pack = load_pack()
    plain = classify_stream(io.BytesIO("\n".join(_ESCAPED_LINES).encode()), pack)
    assert plain.category == "model_requirement"
    escaped = "\n".join(("> " if quoted else "") + line for line in _ESCAPED_LINES)
    data = ("<pre><code>" + html.escape(escaped) + "</code></pre>").encode()
    verdict = classify_stream(io.BytesIO(data), pack)
    assert (verdict.category, verdict.rule) == (plain.category, plain.rule)


@given(st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40))
@settings(max_examples=tiers.examples(300), deadline=None)
def test_an_entity_cut_between_two_reads_is_unescaped(cuts):
    """Read after read, an entity cut at the end of one read is completed by the next."""
    import html

    from diagnostics.formats.pastes import _Unescaped

    text = "x &quot;a&quot; &#39;b&#x27; &gt; &lt;&amp;&nbsp;c &amp d&" * 3
    data, out, at, undo = text.encode(), b"", 0, _Unescaped()
    for cut in cuts:
        out += undo(data[at : at + cut])
        at += cut
    out += undo(data[at:]) + undo(b"")
    assert out.decode() == html.unescape(text).replace("\xa0", " ")


def test_a_log_with_a_few_entities_of_its_own_is_left_alone():
    """A URL's "&amp;" or a template's "&gt;" in a plain log is the log's own text."""
    from diagnostics.formats.pastes import undone

    text = "\n".join(_ESCAPED_LINES + ['GET /v1/models?a=1&amp;b=2 "x" <y>'] * 3).encode()
    assert undone(text) == []
