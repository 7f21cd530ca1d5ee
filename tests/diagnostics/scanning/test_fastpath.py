"""The block scanner's shortcuts (start at the last ready marker, skip what cannot change
the verdict, cut prefilter tails) and the disk cache of compiled databases: the file
path still gives the verdict that feeding every line gives (the worker's line path),
on logs built from the real fixtures the way big logs look: many starts in one file,
a crash loop, a start followed by serving, a failure after hours of serving."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import subprocess
import sys

import hyperscan
import pytest

from diagnostics.classify.classifier import Classifier
from diagnostics.formats.streams import LineSplitter
from diagnostics.pack import dbcache, matching
from diagnostics.pack.matching import prefilter_form
from diagnostics.pack.rules import load_pack
from diagnostics.scanning import fastpath
from diagnostics.scanning.scan import classify_stream
from tests.diagnostics.cases import FIXTURES
from tests.support import tiers
from tests.support.packs import shipped_pack

PACK = shipped_pack()
VLLM = FIXTURES / "vllm-0.32"
# The real logs (the reconstructed ones are not: fixtures/reconstructed/README.md).
REAL_LOGS = sorted(p for p in FIXTURES.rglob("*.log") if "reconstructed" not in p.parts)


def _log(name: str) -> bytes:
    lines = (VLLM / name).read_bytes().splitlines(keepends=True)
    data = b"".join(line for line in lines if not line.startswith(b"#|"))
    return data if data.endswith(b"\n") else data + b"\n"


OK = _log("startup-ok.log")
KV = _log("kv-cache-too-small.log")
FAILS = [_log(p.name) for p in sorted(VLLM.glob("*.log")) if p.name != "startup-ok.log"]
SERVING = (
    b'(APIServer pid=1) INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    b"(APIServer pid=1) INFO 11-29 18:40:00 [loggers.py:248] Engine 000: Avg prompt "
    b"throughput: 12.0 tokens/s, Running: 1 reqs, GPU KV cache usage: 0.6%\n"
)


def line_path(data: bytes):
    classifier = Classifier(PACK)
    splitter = LineSplitter()
    for line in splitter.feed(data):
        classifier.feed(line.decode("utf-8", "replace"))
    for line in splitter.close():
        classifier.feed(line.decode("utf-8", "replace"))
    return classifier.diagnosis()


def _agree(data: bytes) -> None:
    expected = line_path(data)
    for block_size in (1 << 20, 4096, 257):
        assert classify_stream(io.BytesIO(data), PACK, block_size=block_size) == expected, (
            block_size
        )


def _built() -> dict[str, bytes]:
    rng = random.Random(13)
    logs = {
        "crash loop": KV * 40,
        "start then serving": OK + SERVING * 3000,
        "serving then a failure": OK + SERVING * 3000 + KV,
        "a failure then quiet lines": OK + KV + SERVING * 2000,
        "a failure with its continuation at the end": OK + SERVING * 2000 + KV[:-1],
        "failures then a start": b"".join(FAILS) + OK,
        "many starts, the last fails": (b"".join(FAILS) + OK) * 3 + KV,
        "crash loop of different failures": b"".join(rng.sample(FAILS, len(FAILS))) * 3,
        "a better failure late in a crash loop": KV * 30 + b"".join(FAILS) + KV * 5,
        "crlf": (OK + SERVING * 200 + KV).replace(b"\n", b"\r\n"),
        # a cause, a requested shutdown, then a device fault of the torn-down context: the
        # stopping marker must be read (the cause stands after it)
        "a cause, a shutdown, a fault": b"INFO:     Application startup complete.\n"
        + SERVING * 2000
        + b"ERROR:    [Errno 98] error while attempting to bind on address: address already "
        b"in use\n"
        + SERVING * 2000
        + b"INFO:     Waiting for application shutdown.\n"
        + SERVING * 2000
        + b"RuntimeError: CUDA error: initialization error\n",
    }
    wrapped = re.sub(rb"(?m)^(.{100})(.+)$", rb"\1\n\2", OK + KV)  # cut at 100 columns
    logs["wrapped at 100 columns"] = wrapped * 3
    colour = (
        (OK + KV)
        .replace(b"INFO", b"\x1b[32mINFO\x1b[0m")
        .replace(b"ERROR", b"\x1b[31mERROR\x1b[0m")
    )
    logs["colour codes"] = colour * 3
    return logs


@pytest.mark.parametrize("name", list(_built()))
def test_big_logs_give_the_line_path_verdict(name):
    _agree(_built()[name])


def test_a_ready_marker_at_the_start_of_a_block_after_wrapped_lines():
    """The restart backs up over hard-wrapped lines before the ready marker: the
    classifier joins such a line with the next, so they belong to what follows."""
    cut = b"x" * 99 + b"y\n"  # exactly 100 columns: looks cut by a terminal
    ready = b"INFO:     Application startup complete.\n"
    # (a new start after the failed one: a ready marker after a failure that left vLLM's
    # program, with no start between, is another program's)
    start = b"INFO 11-29 18:40:00 [api_server.py:1] vLLM API server version 0.32.0\n"
    data = OK + KV + start + cut * 5 + ready + SERVING * 10 + KV
    _agree(data)
    stream = io.BytesIO(data)
    restart = fastpath.restart_point(stream, 0, PACK)
    assert restart is not None
    assert data[restart.offset :].startswith(cut * 5 + ready)
    assert restart.lines == data[: restart.offset].count(b"\n")


def test_no_ready_marker_means_no_restart():
    assert fastpath.restart_point(io.BytesIO(KV * 3), 0, PACK) is None


@pytest.mark.parametrize(
    ("pattern", "form"),
    [
        (r"a{0,300}?b", "a*?b"),
        (r"(?:ab){1,3}c{2}", "(?:ab)*c*"),
        (r"^x{2,}$", "x*"),
        (r"[a{2}]\{2}{}a{,5}", r"[a{2}]\{2}{}a{,5}"),  # in a class, escaped, or literal
    ],
)
def test_the_prefilter_form_drops_anchors_and_widens_bounded_repeats(pattern, form):
    assert prefilter_form(pattern) == form


def test_the_widened_prefilter_finds_every_line_the_bounded_one_found(monkeypatch):
    """On every line of the fixtures, the line database (bounded repeats widened) reports
    each pattern the same patterns with their bounds report: widening only adds."""
    monkeypatch.setattr(matching, "_repeat", lambda: re.compile(r"(?!x)x"))  # no widening
    expressions = [prefilter_form(p.regex.pattern).encode() for p in PACK.patterns]
    bounded = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    flag = hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_SINGLEMATCH
    ids = list(range(len(expressions)))
    bounded.compile(expressions=expressions, ids=ids, elements=len(ids), flags=[flag] * len(ids))
    assert any(b"{" in e for e in expressions)  # the patterns have bounded repeats to widen
    for path in tiers.sample(REAL_LOGS, 3):  # (the quick run: every third one)
        for line in path.read_bytes().splitlines():
            assert _hits(bounded, line) <= _hits(PACK.line_database, line), (path.name, line)


def test_prefilter_heads_match_every_line_the_full_patterns_match():
    lines = [line for path in REAL_LOGS for line in path.read_bytes().splitlines()]
    full = PACK.line_database  # every pattern's prefilter form, single-match
    heads = fastpath.scanner(PACK).heads
    for line in lines:
        assert _hits(full, line) <= _hits(heads, line), line


@pytest.mark.parametrize(
    ("pattern", "head"),
    [
        (r"\s*(?:AttributeError|KeyError): (?P<detail>.+)", r"\s*(?:AttributeError|KeyError): "),
        (r"Error(?::\s*(?P<detail>.*))?", r"Error"),
        (r"foo|bar.*", r"foo|bar.*"),  # a top-level alternation is left alone
        (r"ab.*", r"ab.*"),  # the head would be too short
        (r"Loading weights took [\d.]+ s", r"Loading weights took [\d.]+ s"),
    ],
)
def test_prefilter_head(pattern, head):
    assert fastpath.prefilter_head(prefilter_form(pattern)) == head


def test_joined_block_reads_as_the_classifier_reads_lines():
    block = b"a\rb\nc\r\r\nd\x1b[31me\x1b[0m\r\r[0mf\n"
    assert fastpath._joined(fastpath._cleaned(block)) == b"a bcde  f"


# -- the database cache ------------------------------------------------------------


def _expressions(*patterns: str) -> tuple[list[bytes], list[int], list[int]]:
    return [p.encode() for p in patterns], list(range(len(patterns))), [0] * len(patterns)


def _build(expressions: list[bytes], calls: list[int]):
    def build():
        calls.append(1)
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=expressions, ids=list(range(len(expressions))), flags=0)
        return db

    return build


def _hits(db, data: bytes) -> set[int]:
    found: set[int] = set()
    db.scan(data, match_event_handler=lambda i, *_: found.add(i))
    return found


def test_cache_reads_back_what_it_compiled(tmp_path):
    expressions, ids, flags = _expressions("foo", "ba+r")
    key = dbcache.key(expressions, ids, flags, hyperscan.HS_MODE_BLOCK)
    calls: list[int] = []
    for _ in range(3):
        db = dbcache.load_or_compile(
            key, hyperscan.HS_MODE_BLOCK, _build(expressions, calls), tmp_path
        )
        assert _hits(db, b"x baaar foo") == {0, 1}
    assert calls == [1]


def test_a_changed_pattern_is_another_entry(tmp_path):
    one = dbcache.key(*_expressions("foo", "bar"), hyperscan.HS_MODE_BLOCK)
    other = dbcache.key(*_expressions("foo", "baz"), hyperscan.HS_MODE_BLOCK)
    flags = dbcache.key([b"foo", b"bar"], [0, 1], [0, 1], hyperscan.HS_MODE_BLOCK)
    assert len({one, other, flags}) == 3


def test_a_corrupt_entry_is_compiled_again(tmp_path):
    expressions, ids, flags = _expressions("foo")
    key = dbcache.key(expressions, ids, flags, hyperscan.HS_MODE_BLOCK)
    calls: list[int] = []
    dbcache.load_or_compile(key, hyperscan.HS_MODE_BLOCK, _build(expressions, calls), tmp_path)
    entry = tmp_path / f"{key}.hsdb"
    for damage in (entry.read_bytes()[:-7], b"garbage", entry.read_bytes()[:30] + b"\0" * 99):
        entry.write_bytes(damage)
        db = dbcache.load_or_compile(
            key, hyperscan.HS_MODE_BLOCK, _build(expressions, calls), tmp_path
        )
        assert _hits(db, b"foo") == {0}
    assert len(calls) == 4


def test_an_unwritable_cache_folder_is_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    expressions, ids, flags = _expressions("foo")
    key = dbcache.key(expressions, ids, flags, hyperscan.HS_MODE_BLOCK)
    calls: list[int] = []
    for _ in range(2):
        db = dbcache.load_or_compile(
            key, hyperscan.HS_MODE_BLOCK, _build(expressions, calls), blocker / "cache"
        )
        assert _hits(db, b"foo") == {0}
    assert calls == [1, 1]


def test_a_database_compiled_while_waiting_for_the_lock_is_read_not_compiled(tmp_path, monkeypatch):
    """Processes started together on an empty cache: the one that waited for the compile
    lock finds the entry the holder wrote, and compiles nothing."""
    expressions, ids, flags = _expressions("foo")
    key = dbcache.key(expressions, ids, flags, hyperscan.HS_MODE_BLOCK)
    theirs: list[int] = []
    compiled_by_them = _build(expressions, theirs)()
    waited = dbcache._compiling

    @contextlib.contextmanager
    def while_they_compile(folder):
        with waited(folder):  # what the other process wrote before it let go of the lock
            dbcache.write_entry(folder, f"{key}.hsdb", hyperscan.dumpb(compiled_by_them))
            yield

    monkeypatch.setattr(dbcache, "_compiling", while_they_compile)
    mine: list[int] = []
    db = dbcache.load_or_compile(key, hyperscan.HS_MODE_BLOCK, _build(expressions, mine), tmp_path)
    assert _hits(db, b"foo") == {0}
    assert mine == []


def test_the_compile_lock_is_held_against_other_processes(tmp_path):
    probe = (
        "import sys; from filelock import FileLock, Timeout\n"
        "try:\n    FileLock(sys.argv[1], timeout=0).acquire()\nexcept Timeout:\n    print('held')"
    )
    lock = str(tmp_path / "compile.lock")
    with dbcache._compiling(tmp_path):
        held = subprocess.run([sys.executable, "-c", probe, lock], capture_output=True, text=True)
    free = subprocess.run([sys.executable, "-c", probe, lock], capture_output=True, text=True)
    assert (held.stdout.strip(), free.stdout.strip()) == ("held", "")


def test_cache_folder_follows_xdg_and_can_be_turned_off(tmp_path):
    assert dbcache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == str(
        tmp_path / "runpod-vllm-worker" / "hyperscan"
    )
    assert os.path.isabs(dbcache.cache_dir({"XDG_CACHE_HOME": "relative"}) or "")
    assert dbcache.cache_dir({"DIAGNOSE_CACHE": "off"}) is None


def test_a_version_printed_before_the_last_ready_marker_still_names_the_cause():
    """The restart skips the start's own lines; what the verdict shows from them (the
    version the start announced) is looked up backwards."""
    failure = b"TypeError: EngineArgs.__init__() got an unexpected keyword argument 'foo_bar'\n"
    data = OK + SERVING * 500 + failure
    expected = line_path(data)
    assert expected.rule == "engine-args-unknown-keyword"
    assert "0.32.0" in expected.cause
    _agree(data)


def test_a_new_start_after_ready_is_read_even_when_a_failure_stands(tmp_path):
    """A rule that counts only before ready (a bare error after ready may be a failed
    request) counts again once a new start begins: the start marker can change the
    verdict, so the block holding it is not skipped."""
    (tmp_path / "00-phases.yaml").write_text(
        "phases:\n"
        "  - phase: starting\n    patterns: ['STARTING UP']\n"
        "  - phase: ready\n    patterns: ['SERVING NOW']\n"
    )
    (tmp_path / "10-rules.yaml").write_text(
        "rules:\n"
        "  - id: better\n    category: oom\n    permanent: true\n"
        "    patterns: ['BETTER FAILURE']\n    when: {before_ready: true}\n"
        "    cause: better\n    fix: fix it\n"
        "  - id: worse\n    category: other\n    permanent: false\n"
        "    patterns: ['WORSE FAILURE']\n    cause: worse\n    fix: retry\n"
    )
    pack = load_pack(tmp_path)
    filler = b"INFO nothing to see here, just a request log line\n" * 300
    data = b"SERVING NOW\nWORSE FAILURE\n" + filler + b"STARTING UP\n" + filler
    data += b"BETTER FAILURE\n" + filler
    classifier = Classifier(pack)
    for line in data.splitlines():
        classifier.feed(line.decode())
    expected = classifier.diagnosis()
    assert expected.rule == "better"
    for block_size in (1 << 20, 1024, 100):
        assert classify_stream(io.BytesIO(data), pack, block_size=block_size) == expected


def test_the_verdict_names_the_last_version_a_crash_loop_announced():
    """Skipped blocks still count for what the verdict shows: the version is the last
    one announced, even when the lines announcing it were never fed."""
    failure = b"TypeError: EngineArgs.__init__() got an unexpected keyword argument 'foo_bar'\n"
    filler = SERVING * 100

    def start(version: bytes) -> bytes:
        return b"INFO Initializing a V1 LLM engine (v" + version + b") with config: x\n"

    data = (start(b"0.31.0") + failure + filler) * 20 + start(b"0.32.1") + failure + filler
    expected = line_path(data)
    assert expected.rule == "engine-args-unknown-keyword"
    assert "0.32.1" in expected.cause
    _agree(data)


def test_reading_stops_where_nothing_matches_any_more():
    data = OK + SERVING * 200
    found = fastpath.plan(io.BytesIO(data), 0, PACK, chunk=1024)
    assert found.restart is not None
    assert found.restart.offset < found.quiet_from < len(OK) + 4096
    assert fastpath.plan(io.BytesIO(data + KV), 0, PACK, chunk=1024).quiet_from == len(data + KV)


class _Pipe(io.RawIOBase):
    """A stream that cannot seek, as stdin from a pipe."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self._data.read(min(len(buffer), 1000))  # short reads, as a pipe gives
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("name", ["many starts, the last fails", "crash loop", "crlf"])
def test_a_pipe_gives_the_file_verdict(name):
    data = _built()[name]
    stream = io.BufferedReader(_Pipe(b"\xef\xbb\xbf" + data))
    assert not stream.seekable()
    assert classify_stream(stream, PACK) == line_path(data)


class _Counting(Classifier):
    def __init__(self, pack):
        super().__init__(pack)
        self.fed_lines = 0

    def feed(self, raw, lineno=None):
        self.fed_lines += 1
        return super().feed(raw, lineno)


def test_a_crash_loop_is_read_at_its_failure_and_its_blocks_cut_lines_only():
    """After the first failure of a crash loop, a block is read only for the lines cut at
    a terminal's width that end it and the lines that go on from them, never whole;
    the skipped lines are counted once, as their blocks pass (not read again to count
    them when a later line is fed). The verdict and its line are the line path's."""
    copies = 50
    data = KV * copies
    # One block in five ends in a line cut at the terminal's width (a traceback's code
    # line; in a real crash loop one block in twenty does); the others are skipped.
    cut = KV.index(b"get_kv_cache_configs(\r\n") + len(b"get_kv_cache_configs(\r\n")
    blocks, rest = [], b""
    for copy in range(copies):
        blocks.append(rest + (KV[:cut] if copy % 5 == 4 else KV))
        rest = KV[cut:] if copy % 5 == 4 else b""
    blocks.append(rest)
    assert b"".join(blocks) == data
    cut_ends = sum(1 for b in blocks if fastpath._cut_lines(b, fastpath.scanner(PACK)))
    assert cut_ends == copies // 5
    recounted: list[tuple[int, int]] = []

    def recount(begin: int, end: int) -> int:
        recounted.append((begin, end))
        return data.count(b"\n", begin, end)

    classifier = fastpath.classify_blocks(blocks, _Counting(PACK), 0, recount)
    assert classifier.diagnosis() == line_path(data)
    assert len(recounted) <= 1
    first = KV.count(b"\n")
    assert classifier.fed_lines <= first + 4 * cut_ends, (classifier.fed_lines, cut_ends)
