"""Byte-stream adapters for reading logs: encodings, line endings, long lines, backwards.

Everything here works in bounded memory whatever the input: no line is held longer than
:data:`MAX_LINE` bytes (a longer one is read as pieces, cut where no secret splits), and
reading a file backwards keeps one block and one line at a time.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol

from diagnostics.formats.pastes import undone
from diagnostics.redaction.redact import safe_cut_bytes

# A longer "line" is read as pieces of at most this size (the worker's pipe reader too).
MAX_LINE = 1 << 20
# How far back from MAX_LINE a piece may end to avoid splitting a word (or a secret).
LINE_BACKOFF = 64 * 1024

_MAC_PROBE = 64 * 1024  # a log with CRs but no LF in this much uses CR as its line end
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Piece(bytes):
    """A block that ends inside a line longer than MAX_LINE: its final b"\\n" was added."""


def piece_end(line: bytes) -> int:
    """Where to end the first piece of an unfinished ``line`` longer than MAX_LINE."""
    return safe_cut_bytes(line, MAX_LINE, LINE_BACKOFF)


class _Recoded:
    """A UTF-16/32 stream (with its BOM) read as UTF-8."""

    def __init__(self, head: bytes, stream: BinaryIO, encoding: str):
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(encoding)("replace")
        self._pending = self._decoder.decode(head).encode("utf-8", "surrogateescape")

    def read(self, size: int = -1, /) -> bytes:
        while size < 0 or len(self._pending) < size:
            raw = self._stream.read(size if size > 0 else 1 << 20)
            text = self._decoder.decode(raw, final=not raw)
            self._pending += text.encode("utf-8", "surrogateescape")
            if not raw:
                break
        if size < 0:
            size = len(self._pending)
        out, self._pending = self._pending[:size], self._pending[size:]
        return out


class _Transformed:
    """A log read through a change of its bytes that keeps its lines (see decoded)."""

    def __init__(self, stream: Reader, change: Callable[[bytes], bytes]):
        self._stream, self._change = stream, change

    def read(self, size: int = -1, /) -> bytes:
        return self._change(self._stream.read(size))


class _JsonLines:
    """A JSON log (docker's json-file driver, structured loggers, collectors' exports:
    see _TEXT_KEYS) read as the lines it holds; a line that is not such an object (or
    longer than MAX_LINE) passes as is. ``times``: the first records' times (None: a
    record without), by which the log's order is judged."""

    def __init__(self, head: bytes, stream: Reader):
        self._stream, self._raw, self._pending = stream, head, b""
        self.times: list[object] = []

    def read(self, size: int = -1, /) -> bytes:
        while size < 0 or len(self._pending) < size:
            more = self._stream.read(1 << 20)
            self._raw += more
            end = self._raw.rfind(b"\n") + 1
            if not more or len(self._raw) > MAX_LINE:
                end = len(self._raw)  # the end, or a line too long to decode: as it is
            for line in self._raw[:end].splitlines(keepends=True):
                text, time = _json_record(line)
                self._pending += text
                if len(self.times) < TIMED_RECORDS:
                    self.times.append(time)
            self._raw = self._raw[end:]
            if not more and not self._raw:
                break
        if size < 0:
            size = len(self._pending)
        out, self._pending = self._pending[:size], self._pending[size:]
        return out


TIMED_RECORDS = 50  # the records whose times judge a JSON log's order
# The key that holds the line: docker's json-file ("log"), structured loggers' ("message",
# "msg"), Google Cloud's text entries, Loki's export (logcli --output=jsonl: "line"); and
# the key a collector's export puts the record under: Datadog's ("attributes", "content"),
# Google Cloud's structured entries ("jsonPayload"), Elasticsearch's hits ("_source").
_TEXT_KEYS = ("log", "message", "msg", "textPayload", "line")
_RECORD_KEYS = ("attributes", "content", "jsonPayload", "_source")
# The record's time: docker's "time", collectors' "timestamp" (ISO, or CloudWatch's epoch
# ms), Elasticsearch's "@timestamp", structured loggers' "ts".
_TIME_KEYS = ("time", "timestamp", "@timestamp", "ts")


def _json_record(line: bytes) -> tuple[bytes, object]:
    """The line a JSON record holds, and its time (None: none); a line that is no such
    record, as it is."""
    if len(line) > MAX_LINE or not line.lstrip().startswith(b"{"):
        return line, None
    try:
        value = json.loads(line)
    except ValueError:
        return line, None
    if not isinstance(value, dict):
        return line, None
    text, time = _text(value), _time(value)
    for record in (value.get(key) for key in _RECORD_KEYS):
        if isinstance(record, dict):
            text, time = text or _text(record), time or _time(record)
    if text is None:
        return line, None
    return text.rstrip("\n").encode("utf-8", "surrogatepass") + b"\n", time


def _text(record: dict[str, object]) -> str | None:
    return next((v for k in _TEXT_KEYS if isinstance(v := record.get(k), str)), None)


def _time(record: dict[str, object]) -> object:
    """A record's time: a number, or ISO text (digits alone, Loki's nanoseconds: a number)."""
    for key in _TIME_KEYS:
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value[:4].isdigit():
            return int(value) if value.isdigit() else value.replace("T", " ")
    return None


def record_times(reader: Reader) -> list[object] | None:
    """The first records' times of a JSON log from :func:`decoded`; None: no JSON log."""
    return reader.times if isinstance(reader, _JsonLines) else None


def _is_json_log(first: bytes) -> bool:
    line = first.lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and _json_record(line + b"\n")[0] != line + b"\n"


def decoded(first: bytes, stream: BinaryIO, block_size: int) -> tuple[bytes, Reader]:
    """The first block and the rest of a log as UTF-8 with LF line ends.

    A UTF-16 or UTF-32 log (with its BOM) is decoded; a UTF-8 BOM is dropped; a log
    with CRs but no LF in its first 64 KiB uses CR as its line end; a screenshot's text
    with doubled gaps is read single-spaced; a container runtime's JSON log is read as
    the lines it holds.
    """
    reader: Reader = stream
    for bom, encoding in _BOMS:
        if first.startswith(bom):
            reader = _Recoded(first, stream, encoding)
            first = reader.read(block_size)
            break
    else:
        if first.startswith(codecs.BOM_UTF8):
            first = first[len(codecs.BOM_UTF8) :]
    while b"\r" in first and b"\n" not in first and len(first) < _MAC_PROBE:
        more = reader.read(_MAC_PROBE - len(first))  # judge on more than one short line
        if not more:
            break
        first += more
    if b"\n" not in first and b"\r" in first:
        reader = _Transformed(reader, lambda data: data.replace(b"\r", b"\n"))
        first = first.replace(b"\r", b"\n")
    for undo in undone(first[:_MAC_PROBE]):  # a screenshot's OCR, HTML escaping
        reader, first = _Transformed(reader, undo), undo(first)
    while first.lstrip().startswith(b"{") and b"\n" not in first and len(first) < _MAC_PROBE:
        more = reader.read(_MAC_PROBE)  # the whole first line, to tell the format
        if not more:
            break
        first += more
    if _is_json_log(first):
        reader = _JsonLines(first, reader)
        first = reader.read(block_size)
    return first, reader


def cut_pieces(line: bytes) -> tuple[list[bytes], bytes]:
    """Cut pieces off the head of ``line`` (no b"\\n" in it) while it is longer than
    MAX_LINE: (the pieces, what is left). Where a piece ends depends only on the bytes
    before it, so a line cut while it arrives is cut as it would be whole."""
    pieces: list[bytes] = []
    start = 0
    while len(line) - start > MAX_LINE:
        end = start + piece_end(line[start : start + MAX_LINE + 1])
        pieces.append(line[start:end])
        start = end
    return pieces, line[start:]


def blocks(first: bytes, stream: Reader, block_size: int) -> Iterator[bytes]:
    """Blocks that end on a line boundary (the last may not); a line longer than
    MAX_LINE comes as :class:`Piece` blocks, so no more than about MAX_LINE plus one
    block is ever held."""
    block_size = min(block_size, MAX_LINE)  # so only a block's first line can be long
    carry = b""
    for more in _chunks(first, stream, block_size):
        data = carry + more
        first_end = data.find(b"\n")
        if first_end < 0 or first_end > MAX_LINE:
            pieces, rest = cut_pieces(data[:first_end] if first_end >= 0 else data)
            yield from (Piece(piece + b"\n") for piece in pieces)
            data = rest + data[first_end:] if first_end >= 0 else rest
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield data[: cut + 1]
            carry = data[cut + 1 :]
        else:
            carry = data
    if carry:
        yield carry


def _chunks(first: bytes, stream: Reader, size: int) -> Iterator[bytes]:
    for start in range(0, len(first), size):
        yield first[start : start + size]
    while chunk := stream.read(size):
        yield chunk


class LineSplitter:
    """Splits a byte stream that arrives in chunks (a pipe) into lines, as the file
    reader does: each line keeps its b"\\n"; a line longer than MAX_LINE comes out in
    pieces cut by :func:`piece_end`. Holds at most MAX_LINE plus one chunk."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._buffer + chunk).split(b"\n")
        out: list[bytes] = []
        for line in lines[:-1]:
            if len(line) > MAX_LINE:
                pieces, line = cut_pieces(line)
                out += pieces
            out.append(line + b"\n")
        pieces, self._buffer = cut_pieces(lines[-1])
        out += pieces
        return out

    def close(self) -> list[bytes]:
        rest, self._buffer = self._buffer, b""
        return [rest] if rest else []


def seekable(stream: BinaryIO) -> bool:
    """Whether ``stream`` can be read backwards (a file; not a pipe)."""
    try:
        return stream.seekable()
    except (AttributeError, OSError, ValueError):
        return False
