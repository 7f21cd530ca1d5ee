"""What the pack's patterns read on one raw line, apart from what the classifier does
with it: pure, so a line met again (a crash loop's repeated paste, ranks printing the
same words) is read once (:func:`read_line`)."""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import NamedTuple

from diagnostics.classify.normalize import clean_raw, normalize
from diagnostics.pack.rules import Pattern, RulePack

# A line longer than this is read each time it comes (the memo holds no long lines).
_MEMO_UP_TO = 2048
_MEMO_SIZE = 4096

# What a hit pattern does with the line: its phase marker (with its captures), a rule's
# finding, an IPython header's class (with the class), a marker the progress records.
PHASE, RULE, HEADER_CLASS, SEEN = range(4)

_NOT_SEEN = frozenset({"phase", "rule", "reshaped", "error_level"})

# A traceback's code line, not a message (IPython's context lines and pytest's, under
# their line numbers, IPython's arrow): a Python ``except`` clause, numbered or not,
# source that catches an exception (``except GatedRepoError as e:`` is no refusal of the
# hub); a numbered raise or string literal, the source of a message of a branch that may
# not have run, never the message raised (that is the exception line below the frames);
# a numbered statement or comment (``elif isinstance(err, GatedRepoError):``, ``# Repo
# not found or gated``), code that names what it tests for.
_SOURCE_LINE = re.compile(
    r"^\s*(?:-*>\s*)?(?:(?:\d+\s+)?except\b[^:]*:\s*(?:#.*)?$|\d+\s+(?:raise\b|[rRbBuUfF]{0,2}[\"']"
    r"|(?:el)?if\b|else\s*:|for\b|while\b|return\b|def\b|class\b|with\b|assert\b|#))"
)


class Reading(NamedTuple):
    error_level: bool  # a level a rule reads is on the raw line (normalising strips it)
    text: str  # normalised
    clean: str  # the raw line, colour codes and carriage returns cleaned
    actions: tuple[tuple[int, int, object], ...]  # (what, pattern index, its value)


def hit_ids(pack: RulePack, text: str | bytes) -> set[int]:
    """The indexes of the pack's patterns that hit ``text`` (str, or its UTF-8)."""
    ids: set[int] = set()
    pack.line_database.scan(
        text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text,
        match_event_handler=lambda i, _f, _t, _fl, _c: ids.add(i),
    )
    return ids


def rules_matching(pack: RulePack, text: str) -> set[int]:
    """The priorities of the rules whose patterns match ``text``."""
    encoded = text.encode("utf-8", "surrogateescape")  # (as linereading reads a line)
    patterns = [pack.patterns[i] for i in hit_ids(pack, encoded)]
    return {p.owner for p in patterns if p.kind == "rule" and p.regex.search(encoded)}


def may_match(pack: RulePack, text: str) -> set[int]:
    """The ``id`` of each pattern the prefilter says may match ``text``."""
    return {id(pack.patterns[i].regex) for i in hit_ids(pack, text)}


def read_line(pack: RulePack, line: str) -> Reading | None:
    """What the patterns read on ``line`` (without its line end), in the order the
    classifier takes them (traceback headers first); None when no pattern hits it."""
    if len(line) <= _MEMO_UP_TO:
        return _remembered(pack, line)
    return _read(pack, line)


@lru_cache(maxsize=_MEMO_SIZE)
def _remembered(pack: RulePack, line: str) -> Reading | None:
    return _read(pack, line)


def _read(pack: RulePack, line: str) -> Reading | None:
    # A pattern that matches the normalised text also matches the raw line (normalising
    # only strips prefixes), unless colour codes or carriage returns sit inside it. Most
    # lines hit nothing and end here.
    plain = "\x1b" not in line and "\r" not in line
    clean = line if plain else clean_raw(line)
    raw = hit_ids(pack, clean)
    if plain and not raw:
        return None
    error_level = bool(raw & pack.error_ids) and not ray_daemons(clean)
    text = normalize(line)
    # (a pattern's regex confirms a hit on the UTF-8 the database read: RE2 reads UTF-8,
    # and given a str its wrapper encodes it and maps every offset back, 2/3 of a search)
    encoded = text.encode("utf-8", "surrogateescape")
    ids = raw if text == clean else hit_ids(pack, encoded)  # no prefix stripped: the same
    if not ids or access_line(text) or _SOURCE_LINE.match(text):
        return Reading(error_level, text, clean, ()) if error_level else None
    clean = clean_raw(line) if plain else clean
    patterns = pack.patterns
    actions: list[tuple[int, int, object]] = []
    for index in sorted(ids, key=lambda i: (patterns[i].kind != "traceback", i)):
        pattern = patterns[index]
        if pattern.kind == "phase" and (found := pattern.regex.search(encoded)):
            actions.append((PHASE, index, _decoded(found.groupdict())))
        elif pattern.kind == "rule" and pattern.regex.search(encoded):
            actions.append((RULE, index, None))
        elif pattern.kind == "header_class" and (cls := text.split(None, 1)[0]):
            actions.append((HEADER_CLASS, index, cls))
        elif _seen(pattern, encoded):
            actions.append((SEEN, index, None))
    return Reading(error_level, text, clean, tuple(actions))


def _decoded(groups: dict[str, bytes | None]) -> dict[str, str | None]:
    return {
        name: None if value is None else value.decode("utf-8", "surrogateescape")
        for name, value in groups.items()
    }


def _seen(pattern: Pattern, text: bytes) -> bool:
    """Whether a hit is a marker the progress records: an ``after`` marker only when its
    whole regex matches (the database holds it without anchors: ``^`` would match
    anywhere)."""
    return pattern.kind not in _NOT_SEEN and (
        pattern.kind != "after" or pattern.regex.search(text) is not None
    )


# Line shapes the findings read (diagnostics.classify.findings). The code line of a raise
# statement, as a traceback prints it under its frame:
RAISE_CODE = re.compile(r"^\s*raise (?P<name>[A-Za-z_][\w.]*)\(")

# An exception line (not after a line cut at a terminal's width).
EXCEPTION_LINE = re.compile(r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?:\([\w.]+\))?: ")

_DOTTED = re.compile(r"[\w.]+")
_CLASS_NAMED = re.compile(r"^\s*(?:[\w.]+\.)?(?P<cls>[A-Za-z_]\w*)(?:\([\w.]+\))?(?::|$)")
# The class a wrapper's message begins with (torch's ``InductorError: AssertionError: ``)
_CARRIED = re.compile(r"^\s*(?:[\w.]+\.)?(?P<cls>[A-Z]\w*(?:Error|Exception)):(?:\s|$)")


def raised_class(text: str, captured: str = "") -> str:
    """The class (without its module) the exception line ``text`` says was raised: the
    class its rule ``captured``, else the one it begins with; when that class is a
    wrapper whose message begins with another class and a colon (torch's compiler around
    what a graph pass raised, ``RuntimeError: ValueError: ...``), the class inside: the
    one the raise site threw. "" for none."""
    name = captured
    if not name:
        found = _CLASS_NAMED.match(text)
        name = found.group("cls") if found else ""
    if name and (inner := _CARRIED.match(text.partition(f"{name}: ")[2])):
        name = inner.group("cls")
    return name.rsplit(".", 1)[-1]


def raised_by(code: str, line: str) -> bool:
    """Whether ``line`` reads as an exception line under the raise statement ``code``:
    any ``...Error:``/``...Exception:`` line, or one of the class the statement names,
    whatever its name ends in (huggingface_hub's ``OfflineModeIsEnabled``, a
    ``...Warning`` raised as an error)."""
    if EXCEPTION_LINE.match(line):
        return True
    raised = RAISE_CODE.match(code)
    if raised is None:
        return False
    name = raised["name"].rpartition(".")[2]
    head, sep, _ = line.partition(": ")
    return bool(sep) and head.rpartition(".")[2] == name and _DOTTED.fullmatch(head) is not None


def logged_repr(text: str, clean: str) -> bool:
    """Whether ``clean`` logs an exception as its repr (``X('msg')``, which normalising
    reshaped into ``text``, ``X: msg``). vLLM 0.6's engine logs an exception so and then
    its traceback: read first, the repr has no frames, so provenance could not judge a
    generic exception; like an IPython header it stands for that traceback's exception
    line, which takes its place (Findings.consider)."""
    exc, sep, _ = text.partition(": ")
    return bool(sep) and clean.endswith(("')", '")')) and f"{exc.lstrip()}(" in clean


# Lines that are not vLLM's own and never the cause of its start, whoever prints them:
# an HTTP server's access line, a client's log of its request to vLLM (or of its failure
# to reach it), vLLM's log of a request's prompt, a Ray daemon's line forwarded to the
# driver's console.


@cache
def _access_line() -> re.Pattern[str]:
    # uvicorn's access line: '%s - "%s %s HTTP/%s" %d %s' (client host:port first; a
    # server's own format may put a field or two after it: KServe's "10.0.0.1:38866 1 -"); a
    # client's log of its request to an OpenAI-style server (httpx: 'HTTP Request: %s %s
    # "%s %d %s"'), whose paths (/v1/..., /health) are never the hub's.
    return re.compile(
        r'\S+:\d+(?: [\w.\-]+){0,2} - "[A-Z]{3,7} \S+ HTTP/\d(?:\.\d)?" \d{3}\b'
        r"|HTTP Request: [A-Z]{3,7} \S+?/(?:v1/|health\b|ping\b|metrics\b|version\b|invocations\b)"
        r'\S* "HTTP/\d(?:\.\d)? \d{3}\b'
        # urllib3's report of a client that could not reach it (a web UI, a task queue
        # waiting for vLLM): the path is the server's API, never the hub's
        r"|Max retries exceeded with url: "
        r"/(?:v1/|health\b|ping\b|metrics\b|version\b|invocations\b)"
        # a client's own words that vLLM's server could not be reached (a trainer waiting
        # for `trl vllm-serve`, a pipeline for its rollout server): vLLM's, never the hub
        r"|(?i:\bvllm server\b.{0,40}?\b(?:can't|cannot|could not|couldn't) be reached"
        r"|\b(?:can't|cannot|could not|couldn't|failed to|unable to) (?:reach|connect to)"
        r" (?:the )?vllm server\b)"
        # vLLM's request logger (entrypoints/logger.py: "Received request %s: prompt: %r,
        # params: ...", "Generated response %s: output: %r"): a client's prompt or the
        # model's answer quoted, any words in them (a user asking about a "CUDA error")
        r"|\bReceived request \S+: prompt: |\bGenerated response \S+: output: "
    )


# A Ray daemon's own line (its log forwarded to the driver's console): Ray's, not vLLM's.
_RAY_DAEMON = re.compile(
    r"^\s*\((?:raylet|gcs_server|autoscaler|dashboard\w*)(?:, ip=[\w.:\-]+)?\) "
)


def ray_daemons(line: str) -> bool:
    """Whether ``line`` (raw) is a Ray daemon's (raylet, GCS, autoscaler, dashboard): an
    error it logs (a disk filling, a node's heartbeat) is Ray's, not vLLM's."""
    return line.lstrip().startswith("(") and _RAY_DAEMON.match(line) is not None


def access_line(text: str) -> bool:
    """Whether ``text`` (normalised) is an HTTP server's access line, or a client's log of
    its request to an OpenAI-style server (or of its failure to reach one): the status in
    it is the server's answer to a client (vLLM's API server, a proxy beside it), never a
    cause of a failed start (a hub's 401 or 404 reads the same words); or vLLM's log of a
    request's prompt or a response's output, which quote what clients and the model wrote."""
    return (
        '" ' in text
        or "HTTP Request: " in text
        or "Max retries exceeded with url: /" in text
        or "llm server" in text.lower()  # the pattern reads these words in any case
        or "Received request " in text
        or "Generated response " in text
    ) and _access_line().search(text) is not None
