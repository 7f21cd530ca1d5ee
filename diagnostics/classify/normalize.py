"""Normalise one raw output line before matching.

Strips what wraps vLLM's message without being part of it: ANSI colour codes,
container and log-shipper gutters (docker compose, journald, kubectl, CloudWatch,
Buildkite, Modal, RunPod's console), timestamps, vLLM process prefixes such as
``(EngineCore_DP0 pid=12)``, ``(VllmWorker rank=1 pid=9)``, ``(RayWorkerWrapper pid=3)``
or ``[rank0]:``, vLLM's own ``LEVEL MM-DD HH:MM:SS [file.py:N]`` header, and what a
paste adds: ``> `` quote markers, leading line numbers (``12 | ``, ``12: ``, ``12<TAB>``)
and Windows line ends, also after an indent the whole paste has (a Markdown code block);
a container runtime's log prefix (CRI: ``<time> stderr F``; docker's JSON lines are read
as their lines by :mod:`diagnostics.formats.streams`). Lines hard-wrapped at a
terminal's width are joined by the classifier (:func:`wrapped_at_width` tells which lines
look cut). The raw line is kept
by the caller for evidence; this module only computes the text the rules see.
"""

from __future__ import annotations

import re
from functools import cache


# CSI sequences (colours, cursor moves) and OSC sequences (titles, links), which end at
# BEL or ST; an OSC without an end stops at the next ESC, so every character is read a
# bounded number of times (an unterminated "ESC ]" once scanned to the end of the line
# for every occurrence: quadratic). The last form: colour codes whose ESC was lost in a
# copy ("[0;36m"), checked only where no ESC is present. The first compiles on first use
# (only a line with an ESC needs it).
@cache
def _ansi() -> re.Pattern[str]:
    return re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b")


_LOST_ESC = re.compile(r"(?<![\w\]])\[[0-9;]{1,12}m")
# Its text without the look-behind: a literal first, which the regex engine finds fast
# (most lines hold a "[" and an "m", few a code; the look-behind tried at every position
# cost 3 us a line, 2026-12-04).
_LOST_ESC_TEXT = re.compile(r"\[[0-9;]{1,12}m")

# A process's own prefix, which it prints before the continuation of a line it wrapped
# too (PROCESS_PREFIX below): vLLM's (EngineCore_DP0 pid=1), Ray's (RayWorkerWrapper
# pid=1, ip=...) and Ray Data's (MapWorker(MapBatches(X)) pid=1, ...), SkyPilot's (task,
# pid=1) and (worker1, rank=1, pid=1, ip=...); torch's [rank0]: and torchrun's --tee
# [default0]:. Spaces are written [ ]: the same text is read in verbose mode below.
_PID_PREFIX = r"\((?:[\w:.\-()]+,?(?:[ ][\w=.:\-]+,?)*[ ])?pid=\d+(?:,[ ][a-z_]+=[\w.:\-]+)*\)"
_RANK_PREFIX = r"\[(?:rank|default)\d+\]:"
# A process's own prefix alone (not a compose service's or a pod's name).
OWN_PREFIX = rf"(?:{_PID_PREFIX}|{_RANK_PREFIX})"

# An ISO time as docker and kubectl put it before each line (--timestamps).
ISO_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
# The time field of Kibana's CSV export ("Mar 27, 2025 @ 18:44:14.890") and of Azure Log
# Analytics' ("3/12/2025, 10:32:56.636 AM"), always quoted (they hold a comma).
# (Its spaces written [ ]: it is read in verbose mode too.)
CSV_TIME = (
    r"(?:[A-Z][a-z]{2}[ ]\d{1,2},[ ]\d{4}[ ]@[ ]\d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{1,2}/\d{1,2}/\d{4},[ ]\d{1,2}:\d\d:\d\d(?:\.\d+)?[ ]?[AP]M)"
)

# Each prefix is stripped from the start of the line, repeatedly, in any order.
_PREFIXES = re.compile(
    r"""^(?:
      \s*\|\s*\d{4}-\d\d-\d\dT[\d:.]+Z?\s*\|\s*                      # CloudWatch gutter
    | \s*\|\s+(?=\[\d{4}-\d\d-\d\dT)                                # Buildkite gutter
    | \[\d{4}-\d\d-\d\dT[\d:.]+Z?\]\s*                              # Buildkite [2024-...Z]
    # ISO timestamps (docker --timestamps, kubectl --timestamps):
    | """
    + ISO_TIME
    + r"""(?:\s*\|)?\s+
    # a CSV export's time field (CloudWatch Logs Insights', Datadog's: "time,message";
    # not logging's "12:00:00,123" milliseconds), quoted or not, in ISO form or as Kibana
    # ("Mar 27, 2025 @ 18:44:14.890") and Azure ("3/12/2025, 10:32:56.636 AM") write it,
    # then the short fields a collector puts before the message (host, pod, container);
    # the message's cell unquoted below
    | "?(?:"""
    + ISO_TIME
    + r"""|"""
    + CSV_TIME
    + r""")"?,(?:"?[\w.\-/:@]{1,300}"?,){0,4}(?=[^\d\s])
    | (?:stdout|stderr)\ [FP]\ ?                                    # a CRI log (after its time)
    | \[\d{4}[-/]\d\d[-/]\d\d[T\ ][\d:.,]+Z?\]\s*                     # [2024-05-01 12:00:00]
    | \d{4}/\d\d/\d\d\ \d\d:\d\d:\d\d(?:[.,]\d+)?\s+                 # 2024/05/01 12:00:00
    | \d\d:\d\d:\d\d(?:[.,]\d+)?\s+                                 # a time alone
    | \[\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*                               # [20:12:04] (a terminal's)
    | -\ [\w.\-]+\ -\ (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\ -\ ?    # "- name - LEVEL -"
    | \[(?:stdout|stderr)\]\s* | (?:stdout|stderr):\s+                 # [stderr], stderr:
    | \|\                                                              # a bare pipe gutter
    | [A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?\s*\|\s*    # Modal gutter
    | [A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\S+\s+[\w.\-/]+(?:\[\d+\])?:\s  # journald
    | [a-z0-9]{12,20}\[(?:info|error|warning|warn|debug)\]\s?       # RunPod console
    | \[[a-z0-9]{12,20}\]\ \[(?:info|error|warning|warn|debug)\]\s?  # its id in brackets
    | [\w.\-]{1,64}(?:-\d+)?\s+\|\s                                 # docker compose service |
    | """
    + _PID_PREFIX
    + r"""\s*                                             # a process's own (above)
    | """
    + _RANK_PREFIX
    + r"""\s*                                            # torch distributed
    | \((?:raylet|gcs_server|autoscaler|dashboard\w*)(?:,\ ip=[\w.:\-]+)?\)\s*  # ray daemons
    | E\ {3,}(?=\S)                                                 # pytest failure lines
    # Triton's report of its vLLM backend's exception, the message after it (glog's
    # header, Triton's quote): "ERROR: Failed to create instance: ValueError: ..." and
    # "failed to load 'm' version 1: Internal: ValueError: ..."
    | [EW]\d{4}\ [\d:.]+\ +\d+\ [\w.\-]+:\d+\]\ "?(?:ERROR:\ Failed\ to\ create\ instance
      |failed\ to\ load\ '[^']{1,200}'\ version\ \d+:\ [A-Z][a-z]+(?:\ [a-z]+)?):\ (?=\S)
    | \[pod/[\w.\-]+/[\w.\-]+\]\s                                     # kubectl logs --prefix
    # a log tailer's pod and container names (stern's "<pod> <container> "), before a
    # process's own prefix or vLLM's header, or a traceback's header, frame or exception
    # line (a name with Error or Exception, then ": " or the line's end)
    | [\w.\-]{1,64}\ (?:[\w.\-]{1,64}\ )?(?=\([^()]*\bpid=\d+[^()]*\)
        |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\ \d\d-\d\d\ \d\d:\d\d:\d\d
        |Traceback\ \(most\ recent\ call\ last\):$|\ +File\ "
        |(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\ |$))
    # a launcher's tag of its program ([qwen-7b] ), before what reads as a log line or a
    # traceback's, or its time (not an in-band tag: vLLM's "[shutdown] API server",
    # torch's "[c10d]")
    | \[[A-Za-z][\w.\-]{0,63}\]\ (?=(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|\(|\s
        |Traceback\b|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt)\b
        |\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d|\d\d:\d\d:\d\d)
    | (?:>[ \t]?)+                                                  # quoted in a reply ("> ")
    | \s{0,6}\d{1,6}(?:[ \t]*[|\u2502][ \t]?|:[ \t]|\t)                 # pasted line numbers
    | \d{1,6}(?:\.\d+)?s\t                                           # Kaggle's seconds, a tab
    # DJL Serving (SageMaker's LMI containers): its tag of the Python process's output
    | (?:DEBUG|INFO|WARN|ERROR)\s+PyProcess\ W-[\w.\-]{1,100}-std(?:out|err):\ ?
    # vLLM's own header: LEVEL MM-DD HH:MM:SS [file.py:N] (V0: without the "[")
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+
      \[?[\w.\-]+\.py:\d+\]\s?
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL):\s+                # uvicorn / logging default
    | \[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]\s*
    )""",
    re.VERBOSE,
)

_MAX_PREFIXES = 8
# Exception messages printed without the exception line's shape, reshaped into it so the
# rules read them: pydantic v1's "msg (type=value_error)", vLLM 0.5's worker report and an
# exception logged as its repr, ValueError('msg').


# Compiled on first use, as _ansi: few logs hold either.
@cache
def _pydantic_v1() -> re.Pattern[str]:
    return re.compile(r"^\s*(?P<msg>\S.*?) \(type=value_error(?:\.\w+)?\)\s*$")


# The class vLLM 0.5's worker report is read as (see reshape).
WORKER_REPORT = "WorkerException"


@cache
def _worker_report() -> re.Pattern[str]:
    return re.compile(r"Exception in worker \S+ while processing method \w+: (?P<msg>.+)$")


@cache
def _repr_exception() -> re.Pattern[str]:
    return re.compile(
        r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\((?P<q>['\"])(?P<msg>.*)(?P=q)\)$"
    )


def strip_ansi(line: str) -> str:
    if "\x1b" in line:
        line = _ansi().sub("", line)
    if "[" in line and _LOST_ESC_TEXT.search(line):
        line = _LOST_ESC.sub("", line)
    return line


def clean_raw(line: str) -> str:
    """The raw line as evidence shows it: no trailing newline, CR or ANSI codes."""
    return strip_ansi(line.rstrip("\r\n")).replace("\r", " ").rstrip()


def normalize(line: str) -> str:
    """The text rules match against: the message without wrappers or prefixes."""
    text = strip_ansi(line.rstrip("\r\n")).replace("\r", " ")
    # Pastes of RunPod's console keep literal "\n" at line ends.
    if text.endswith("\\n"):
        text = text[:-2]
    for _ in range(_MAX_PREFIXES):
        match = _PREFIXES.match(text)
        if not match or match.end() == 0:
            # A paste indented as a whole (a Markdown code block, a tab): the prefix
            # after the indent. An indent with no prefix after it (a traceback's frame
            # and code lines) is kept.
            indented = text.lstrip(" \t")
            match = _PREFIXES.match(indented) if len(indented) < len(text) else None
            if not match or match.end() == 0:
                break
            text = indented
        cell = text[match.end() - 1] == "," and text[match.end() : match.end() + 1] == '"'
        text = text[match.end() :]
        if cell:  # a quoted CSV cell: its quotes doubled inside, one around it
            text = _csv_cell(text)
    return reshape(text)


def _csv_cell(text: str) -> str:
    """The content of the quoted CSV cell ``text`` starts with (the fields after it
    dropped; a cell whose closing quote is on a later line: the rest of this one)."""
    at = 1
    while (end := text.find('"', at)) >= 0:
        if text[end + 1 : end + 2] != '"':
            return text[1:end].replace('""', '"')
        at = end + 2
    return text[1:].replace('""', '"')


def reshape(text: str) -> str:
    """A message printed without the exception line's shape, reshaped into it (also a
    message joined from the lines a terminal cut it into)."""
    if "(type=value_error" in text and (found := _pydantic_v1().match(text)):
        return f"Value error, {found.group('msg')} [type=value_error]"
    if "while processing method" in text and (found := _worker_report().search(text)):
        # A report of the worker's exception, whose own traceback follows (ending in the
        # exception line, which shows where it was raised): read by the rules that name
        # its message, else a consequence (rule worker-exception-report).
        return f"{WORKER_REPORT}: {found.group('msg').rstrip()}"
    text = text.rstrip()
    # An exception logged as its repr (vLLM 0.6's engine: logger.error(repr(e))).
    if text.endswith(("')", '")')) and (found := _repr_exception().match(text)):
        return f"{found.group('exc')}: {found.group('msg')}"
    return text


# Terminal widths at which pasted output is commonly hard-wrapped.
WRAP_WIDTHS = frozenset({80, 100, 120, 160})


# What a process puts before each line it prints, also before the continuation of a line
# it wrapped: vLLM's (EngineCore_DP0 pid=12), torch's [rank0]:, compose's "svc  | ",
# kubectl's [pod/name/container].
# (Also a Hyperscan expression: the block scanner's lines of a terminal's width.)
PROCESS_PREFIX = (
    rf"(?:{_PID_PREFIX} ?|{_RANK_PREFIX} ?"
    r"|[\w.\-]{1,64}(?:-\d+)?[ \t]+\| |\[pod/[\w.\-]+/[\w.\-]+\] )"
)
_PROCESS_PREFIX = re.compile("^" + PROCESS_PREFIX)
# A reply's quote marker before every line: added after the terminal wrapped them, so a
# line's width is measured without it. (Also a Hyperscan expression.)
QUOTE_MARKER = r"(?:>[ \t]?)+"
_QUOTE = re.compile("^" + QUOTE_MARKER)


def wrapped_at_width(line: str) -> bool:
    """Whether a raw line looks cut by a terminal: exactly a common width, with or
    without the process prefix (trailing spaces count: a cut can fall right after one)."""
    if len(line) < 80:
        return False
    part = unwrapped_part(line)
    if (quote := _QUOTE.match(part)) is not None:
        part = part[quote.end() :]
    if len(part) in WRAP_WIDTHS:
        return True
    prefix = _PROCESS_PREFIX.match(part)
    return prefix is not None and len(part) - prefix.end() in WRAP_WIDTHS


def continuation(line: str, first: str) -> str:
    """A wrapped line's continuation as the message goes on: without the process prefix
    it carries when the first part (``first``, raw) carries the same one, without a
    quote marker when the first part is quoted too, and without vLLM's logger header
    when the first part carries the same one (one record's message over several lines)."""
    quote, quoted = _QUOTE.match(line), _QUOTE.match(first)
    if quote is not None and quoted is not None:
        line, first = line[quote.end() :], first[quoted.end() :]
    prefix = _PROCESS_PREFIX.match(line)
    if prefix is not None and first.startswith(prefix.group().rstrip()):
        own = _PROCESS_PREFIX.match(first)
        line, first = line[prefix.end() :], first[own.end() :] if own is not None else first
    # vLLM's logger repeats a record's header on each line of a multi-line message (its
    # NewLineFormatter): the same header on the next line is the same record going on.
    header = LOGGER_HEADER.match(line)
    if header is not None and first.startswith(header.group()):
        return line[header.end() :]
    return line


# The start of vLLM's logger header as it prints it: level, date and time (also the start
# of a record of its own: diagnostics.classify.wrapping).
LOGGER_HEADER_START = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
# vLLM's whole logger header (level, date, time, its file and line), as it prints it
LOGGER_HEADER = re.compile(LOGGER_HEADER_START + r"(?:\.\d+)? \[?[\w.\-]+\.py:\d+\] ")


def unwrapped_part(line: str) -> str:
    """A raw line as printed, for joining with the rest of a wrapped message: no line
    end or colour codes, but its trailing spaces kept."""
    return strip_ansi(line.rstrip("\r\n")).replace("\r", " ")
