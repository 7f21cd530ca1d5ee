"""Which way a log runs: RunPod's console exports list the newest line first, and so do
other collectors' exports (CloudWatch Logs Insights, gcloud logging read, Kibana's and
Azure Log Analytics' CSV: their timestamps go back in time; a JSON export's records,
Loki's and Datadog's, by their time fields). Judged on the first lines; such a log is
read back to front (:func:`reversed_lines`, for :mod:`diagnostics.scanning.scan`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from functools import cache

from diagnostics.classify.normalize import ISO_TIME
from diagnostics.formats.streams import MAX_LINE, Reader

_RUNPOD_CONSOLE = re.compile(rb"^[a-z0-9]{12,20}\[(?:info|error|warning|warn|debug)\]")
_REVERSED_HINTS = (b"worker exited with exit code", b"Traceback (most recent call last)")


def _head(block: bytes) -> list[bytes]:
    """The first lines of ``block``, by which its order is judged."""
    return block[:65536].splitlines()[:50]


def console_head(block: bytes) -> bool:
    """Whether the first lines look like a RunPod console export (either order)."""
    return _console_lines(_head(block))


def _console_lines(head: list[bytes]) -> bool:
    if not head or not _RUNPOD_CONSOLE.match(head[0]):
        return False
    console = sum(1 for line in head if _RUNPOD_CONSOLE.match(line))
    return console * 2 >= len(head)


# A timestamp a collector put at the start of each line (CloudWatch's and GCP's exports,
# docker's --timestamps, journald's ISO form), after at most a quote or a bracket.
_LEADING_TIME = rb"^[\"'\[(]?(?P<iso>" + ISO_TIME.encode() + rb")"


def _newest_first_by_time(head: list[bytes]) -> bool:
    """Whether the first lines (``_head``) carry a collector's timestamps that only go
    back in time (a log export listing the newest line first: CloudWatch Logs Insights,
    gcloud logging read): most of them stamped, none later than the one before, some
    earlier."""
    if not head or sum(line[:1].isdigit() or line[1:2].isalnum() for line in head) * 2 < len(head):
        return False  # most lines begin with no digit nor a quoted time: no stamps
    return going_back([_stamp(line) for line in head])


def going_back(times: Sequence[object]) -> bool:
    """Whether the times of a log's first lines or records (None: one without) only go
    back: most of them timed, none later than the one before, some earlier. Times of
    kinds that do not compare (a number and a text) say nothing."""
    stamps = [time for time in times if time is not None]
    if len(stamps) < 5 or len(stamps) * 2 < len(times):
        return False
    pairs = list(itertools.pairwise(stamps))
    try:
        return all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)  # type: ignore[operator]
    except TypeError:
        return False


_MONTHS = {
    m: n for n, m in enumerate(b"Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)
}


def _stamp(line: bytes) -> bytes | None:
    """The collector's time at the start of ``line`` as sortable bytes: ISO, or a CSV
    export's quoted field as Kibana ("Mar 27, 2025 @ 18:44:14.890") or Azure Log
    Analytics ("3/12/2025, 10:32:56.636 AM") write it."""
    found = _leading().match(line)
    if found is None:
        return None
    if found.group("iso"):
        return found.group("iso").replace(b"T", b" ").replace(b",", b".")
    clock = found.group("clock")
    if found.group("mon"):
        month, day, year = (
            _MONTHS.get(found.group("mon"), 0),
            found.group("kday"),
            found.group("kyear"),
        )
    else:
        month, day, year = int(found.group("month")), found.group("day"), found.group("year")
        hour, rest = clock.split(b":", 1)
        hour24 = int(hour) % 12 + (12 if found.group("half") == b"PM" else 0)
        clock = b"%02d:%s" % (hour24, rest)
    return b"%s-%02d-%02d %s" % (year, month, int(day), clock)


@cache
def _leading() -> re.Pattern[bytes]:  # compiled on first use: most logs never get this far
    return re.compile(
        _LEADING_TIME
        + rb"|^\"(?:(?P<mon>[A-Z][a-z]{2}) (?P<kday>\d{1,2}), (?P<kyear>\d{4}) @ "
        + rb"|(?P<month>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4}), )"
        + rb"(?P<clock>\d{1,2}:\d\d:\d\d(?:\.\d+)?)(?: ?(?P<half>[AP]M))?\""
    )


def looks_reversed(block: bytes) -> bool:
    head = _head(block)
    if _newest_first_by_time(head):
        return True
    if not _console_lines(head):
        return False
    # Newest first: the final "worker exited" line or a traceback's last line on top.
    first_tb = block.find(b"Traceback (most recent call last)")
    first_exc = re.search(rb"\]\s*\w+(?:Error|Exception): ", block)
    return any(h in head[0] for h in _REVERSED_HINTS) or (
        first_exc is not None and (first_tb == -1 or first_exc.start() < first_tb)
    )


def reversed_lines(first: bytes, stream: Reader, block_size: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) from the last line to the first, in bounded memory.

    The input is copied to a temporary file first (a pipe cannot be read backwards);
    a line longer than MAX_LINE keeps only its last MAX_LINE bytes.
    """
    import tempfile  # only here: importing it costs more than classifying a small log

    with tempfile.TemporaryFile() as spool:
        count = 0
        last = b"\n"
        chunk = first
        while chunk:
            spool.write(chunk)
            count += chunk.count(b"\n")
            last = chunk[-1:]
            chunk = stream.read(block_size)
        lineno = count + (last != b"\n")
        pos = spool.tell()
        tail = b""
        skip_final_empty = last == b"\n"
        while pos > 0:
            step = min(block_size, pos)
            pos -= step
            spool.seek(pos)
            parts = (spool.read(step) + tail).split(b"\n")
            tail = parts[0][-MAX_LINE:]
            for line in reversed(parts[1:]):
                if skip_final_empty:
                    skip_final_empty = False
                    continue
                yield lineno, line
                lineno -= 1
        if lineno > 0 and not skip_final_empty:
            yield lineno, tail


# The time an attempt's start line shows: vLLM's logger's ("INFO 09-02 14:08:51"), or a
# collector's ISO stamp before it (the first on the line). vLLM's has no year.
_START_TIME = re.compile(rb"(?<!\d)(?:\d{4}-)?(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?!\d)")
_SAME_START = 120  # seconds: marker lines of one start (its version, then its arguments)
_YEAR_TURNED = 183 * 86400  # a drop this large is December to January, in order


def start_time(line: bytes) -> int | None:
    """The seconds into the year (months of 31 days: only the order counts) at which an
    attempt's start line says it began, or None."""
    found = _START_TIME.search(line)
    if found is None:
        return None
    month, day, hour, minute, second = (int(part) for part in found.groups())
    return (((month * 31 + day) * 24 + hour) * 60 + minute) * 60 + second


def newest_first(starts: Sequence[tuple[int, bytes]]) -> list[int] | None:
    """Where each attempt begins, in paste order, when a user pasted the attempts newest
    first ("latest run on top, the previous one below"): ``starts`` are the attempts'
    marker lines (their position, the line), in paste order. A marker at most
    ``_SAME_START`` seconds after the one before is the same start's; every later start
    must have begun before the one pasted above it (so a log in order, or with a start
    untimed, is not reordered)."""
    kept: list[tuple[int, int]] = []
    for at, line in starts:
        time = start_time(line)
        if time is None:
            return None
        if kept and 0 <= time - kept[-1][1] <= _SAME_START:
            continue  # (the same start's next marker; its time is the first's)
        kept.append((at, time))
    if len(kept) < 2:
        return None
    drops = [before - after for (_, before), (_, after) in itertools.pairwise(kept)]
    if all(0 < drop < _YEAR_TURNED for drop in drops):
        return [at for at, _ in kept]
    return None
