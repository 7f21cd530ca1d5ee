"""Whose line it is, in a log of several services: docker compose prints every
service's output in one stream, each line under its service's name (``vllm-1  | ``,
``open-webui-1  | ``); launchers that run several programs at once tag each line with
its program's name in brackets (``[qwen-7b] ``, kubectl's ``--prefix``
``[pod/vllm-0/vllm] ``, ``concurrently``'s ``[chat] ``). Another service's lines are
not vLLM's: a web UI's own
"Application startup complete" is not vLLM ready, and its "Cannot connect to host vllm"
is what vLLM's failure caused, not why vLLM failed.

A service whose lines carry vLLM's log header (``INFO 10-17 06:13:08 [api_server.py:1]``,
V0's without the brackets), a traceback frame in vLLM's own code, or the usage or error
line of vLLM's argument parser (``usage: api_server.py``, ``vllm serve: error:``), is
vLLM's (also under another program's logger fields that relay vLLM's output, FastChat's
worker's ``date | INFO | stdout | ``); once one
is known, lines under the name of a
service that never showed it are left out. Before that (and in a log of one service)
nothing is left out. Lines without a service name (compose's own ``vllm-1 exited with
code 1``) are kept, and so is a process supervisor's report of a program's end
wherever it is printed (supervisord's ``exited: vllm (terminated by SIGKILL; ...)`` in
its own log's file; a shell's report of its background job's end, ``[1]+  Killed  nohup
vllm serve ...``): it is about the program it names. One vLLM service's ready marker
does not clear another's failure (a project's embedding server up, its chat server
failed: the log shows a failure). The
fast path does not restart at a ready marker under a service's name
(``diagnostics.scanning.readyseek``): whose it is shows only in the lines before.

``tail`` and ``head`` given several files print each file's lines under a header
(``==> vllm.out <==``; ``tail -f`` again each time another file grows): the lines after
it are that file's, as a compose line is its service's (a proxy's "Uvicorn running" in
``litellm.out`` is not vLLM up). Whose such a line is shows only in a header above it,
so ``diagnose`` reads a log with such headers line by line (``diagnostics.scanning.scan``).
A test runner's id of the test it begins (pytest -v's ``tests/test_x.py::test_y``) is such
a header too: a test session starts a server per test, and one test's server up is not
another's failed start answered."""

from __future__ import annotations

import re

from diagnostics.classify.normalize import ISO_TIME, strip_ansi, wrapped_at_width

# A compose line: the service's name with its instance number (a scaled service's
# containers, "replica-0" and "replica-2", are several servers; a letter first, so a
# paste's line numbers, "12 | ...", are not names), padding, the gutter; after any colour
# codes compose puts around the name, the time honcho and foreman (or a launcher, before
# its tag) put first ("14:06:08 vllm.1   | "), and what a paste puts before every line
# (an indent, a Markdown code block's; a reply's quote markers).
# A bracketed tag is followed by a space (``[rank0]:``, torchrun's ``[default0]:`` are
# a process's rank, not a program's name).
_SERVICE = re.compile(
    r"^[ \t]*(?:>[ \t]?)*(?:\x1b\[[\d;]*m)*"
    r"(?:(?:\d{4}-\d\d-\d\d[T ])?\d\d:\d\d:\d\d(?:[.,]\d+)?Z? )?"
    r"(?:(?P<name>[A-Za-z][\w.\-]{0,63}?(?:[-_]\d+)?)(?:\x1b\[[\d;]*m)*[ \t]+\|(?: |$)"
    r"|\[(?P<tag>[A-Za-z][\w.\-/]{0,63})\](?:\x1b\[[\d;]*m)*(?: |$)"
    # GNU parallel's --tag: the argument, a tab, the program's line
    r"|(?P<tab>[A-Za-z][\w.\-]{0,63})\t(?=\S))"
)
# docker compose's own report that a service's container exited ("eval-1 exited with
# code 1"): about that container, printed without its gutter.
_COMPOSE_EXIT = re.compile(r"^\s*(?P<name>[A-Za-z][\w.\-]{0,63}?(?:[-_]\d+)?) exited with code \d+")
# A process supervisor's report of its program's end, in the supervisor's own log (a
# tail of several files shows it under supervisord.log's header): supervisord's
# "exited: vllm (terminated by SIGKILL; not expected)", "gave up: vllm entered FATAL
# state", systemd's "vllm.service: Main process exited, code=killed". About the program
# it names, as compose's exit line is about its service.
_RUNNER_EXIT = re.compile(
    r"\b(?:exited|stopped|gave up): (?P<program>[A-Za-z][\w.\-:]{0,63}) (?:\(|entered FATAL)"
    r"|\b(?P<unit>[A-Za-z][\w@.\-]{0,63})\.service: (?:Main process exited|Failed with result)"
    # a shell's job control reporting its background job's end, the command it ran
    # ("[1]+  Killed                  nohup vllm serve ... > vllm.out 2>&1")
    r"|^\[\d+\][+-]? +(?:Killed|Exit \d+|Segmentation fault|Aborted|Terminated|Done)\b"
    r"(?:\s+\(core dumped\))? +(?P<command>\S.{0,300})"
)
# Its words, found first by a literal search (most lines hold none of them).
_RUNNER_WORDS = re.compile(r"exited: |stopped: |gave up: |\.service: |^\[\d+\][+-]? ")
# What a tagged or prefixed line can start with (a digit: a time before the name).
_TAG_STARTS = frozenset(" \t>[\x1b")
# A Procfile runner's own lines (honcho's, foreman's "system | vllm.1 stopped (rc=-9)"):
# about the services, kept as compose's own lines are.
_RUNNERS = frozenset({"system"})
# Tags that name a stream or a level, not a program: one program's lines all the same.
_NOT_SERVICES = frozenset(
    {"stdout", "stderr", "out", "err", "output", "log", "info", "warn", "warning", "error"}
)
# The time `docker compose logs --timestamps` puts after the gutter.
_TIME = rf"(?:\s*{ISO_TIME})?"
# A traceback frame in vLLM's own code, after the gutter or tag (a paste that begins at
# vLLM's traceback, its header never shown).
_VLLM_FRAME = re.compile(_TIME + r'\s*File "[^"]*[/\\]vllm[/\\][^"]*\.py", line \d+')
# vLLM's programs' argparse lines (their usage, their error), after the gutter or tag: a
# start that ended at its command line printed nothing else.
_VLLM_ARGPARSE = re.compile(
    _TIME + r"\s*(?:usage: (?:api_server\.py|vllm)\b|(?:api_server\.py|vllm(?: serve)?): error: )"
)
# vLLM's logger header, after the gutter or tag (and the time) and a process prefix.
_VLLM_HEADER = re.compile(
    _TIME + r"(?:\x1b\[[\d;]*m)*\s*(?:\([\w:.\- =,]*pid=\d+[^)]*\)\s*)?"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?[\w.\-]+\.py:\d+\]"
)


# The fields another program's logger puts before each line it relays from vLLM
# (FastChat's worker: "2024-03-11 08:14:13 | INFO | stdout | " before vLLM's header, "|
# ERROR | stderr | " before a traceback frame): vLLM's lines inside them are still vLLM's.
_LOGGER_FIELDS = re.compile(r"(?:[^|\n]{1,40}\| ){2,4}")
# The header ``tail``/``head`` print before each file's lines when given several.
SECTION = re.compile(r"^==> (?P<name>[^\n]{1,200}?) <==\s*$")
# A test runner's id of the test it begins (pytest -v's "tests/test_x.py::test_y[param]"
# at a line's start, the test's own output after it): what follows is that test's, as a
# file's lines under tail's header are the file's. A test session starts a server per
# test (or per module): one test's server up says nothing of another's failed start.
# TEST_LINE: such a line's start, after a time at most (read at a line's start).
TEST_ID = r"[\w./-]*test\w*\.py::[A-Za-z_][^\s]{0,200}"
TEST_LINE = _TIME + rf"\s*(?P<name>{TEST_ID})"
_TEST_LINE = re.compile(TEST_LINE)
# pytest's separators of its session report ("=== FAILURES ===", "=== short test summary
# info ===", "=== 1 failed, 3 passed in 318.54s ==="): after its tests ran, a failed
# test's traceback is printed there, under no test's own id: no test's section.
_REPORT = re.compile(r"^={3,} \S[^=]{0,200}? ={3,}\s*$")


class Services:
    """The vLLM services of a compose log (a project may run two vLLM servers, one of
    which fails for the other's memory), as their lines show them."""

    def __init__(self) -> None:
        self.vllm: set[str] = set()
        self.current: str | None = None  # the service of the line read last
        self.section: str | None = None  # the file named by the last tail/head header
        self._cut = False  # the line read last was another service's, cut at a width

    def foreign(self, line: str) -> bool:
        """Whether ``line`` is another service's (and is to be left out). Compose colours
        each service's name on a terminal: a paste may keep the colour codes. A terminal
        that cut a line at its width put the service's name on the first part only: the
        rest, under no name of its own, is that service's too (a web UI's "Cannot connect
        to host vllm ... [Name or service not known]" cut before its last words)."""
        line = _uncoloured(line)
        if self._cut and _service(line) is None and not _own_line(line):
            self._cut = wrapped_at_width(line)
            return True
        left_out = self._foreign(line)
        self._cut = left_out and wrapped_at_width(line)
        return left_out

    def _foreign(self, line: str) -> bool:
        if line.startswith("==> ") and (header := SECTION.match(line)):
            self.section, self.current = header.group("name"), None
            if _stem(self.section) in {_stem(name) for name in self.vllm}:
                self.vllm.add(self.section)  # the same program's other stream (job.err)
            return False
        if ".py::" in line and (test := _TEST_LINE.match(line)):
            self.section = test.group("name")  # the test's own lines follow (its server's)
        elif line.startswith("===") and ".py::" in (self.section or "") and _REPORT.match(line):
            self.section = self.current = None  # (a test's section, not a tail header's)
        if (ended := _COMPOSE_EXIT.match(line)) is not None:  # a service's exit: its line
            name = self.current = ended.group("name")
            return bool(self.vllm) and name not in self.vllm and not _for_vllm(name)
        if _RUNNER_WORDS.search(line) and (report := _RUNNER_EXIT.search(line)) is not None:
            # a supervisor's report of a program's end: the program's line, wherever shown
            name = report.group("program") or report.group("unit")
            if name is None:  # a shell's job: vLLM's when its command names vLLM
                return bool(self.vllm) and not _for_vllm(report.group("command"))
            self.current = name
            return bool(self.vllm) and not self._vllms(name)
        found = _service(line)
        name = None if found is None else _name(found)
        at = 0 if found is None else found.end()
        name = self.current = self.section if name is None else name
        if name is None or name in self.vllm or name in _RUNNERS:
            return False
        if _for_vllm(name):  # a service named for vLLM is vLLM's
            self.vllm.add(name)
            return False
        inner = _LOGGER_FIELDS.match(line, at)
        starts = (at,) if inner is None else (at, inner.end())
        if any(
            known.match(line, start)
            for start in starts
            for known in (_VLLM_HEADER, _VLLM_FRAME, _VLLM_ARGPARSE)
        ):
            self.vllm.add(name)
            return False
        return bool(self.vllm)

    def _vllms(self, program: str) -> bool:
        """Whether a supervisor's ``program`` is a vLLM service: named for vLLM, or the
        name of a vLLM service or of the file a vLLM section was read from
        (``/var/log/supervisor/chat.log``; supervisord's ``chat-stdout---supervisor-x.log``)."""
        if program in self.vllm or _for_vllm(program):
            return True
        files = {re.split(r"[/\\]", name)[-1] for name in self.vllm}
        return any(_stem(file) == program or file.startswith(f"{program}-") for file in files)

    def apart(self, other: str, read_under: str | None = None) -> bool:
        """Whether the line read last and the raw line ``other`` (read under the service
        or tail's file ``read_under``) are two vLLM services' (one's ready marker says
        nothing of the other's failure)."""
        mine, theirs = self.current, service_of(other) or read_under
        return (
            mine is not None
            and theirs is not None
            and mine != theirs
            and {mine, theirs} <= self.vllm
        )


def _own_line(line: str) -> bool:
    """Whether ``line`` names whose it is without a service's gutter (a tail header,
    compose's or a supervisor's report of a program's end)."""
    return (
        line.startswith("==> ")
        or _COMPOSE_EXIT.match(line) is not None
        or (_RUNNER_WORDS.search(line) is not None and _RUNNER_EXIT.search(line) is not None)
    )


def _for_vllm(name: str) -> bool:
    """Whether a service's name names vLLM ("vllm", "vllm-chat"): its lines are vLLM's."""
    return "vllm" in name.lower()


def _stem(name: str) -> str:
    """A file's name without its last suffix: a job's stdout and stderr files (Slurm's
    ``slurm-123.out`` and ``slurm-123.err``, ``vllm.out`` and ``vllm.err``) share it."""
    return name.rsplit(".", 1)[0]


def service_of(line: str) -> str | None:
    """The service ``line`` is printed under, or None (no service's name)."""
    found = _service(_uncoloured(line))
    return None if found is None else _name(found)


def _uncoloured(line: str) -> str:
    """``line`` without colour codes (compose colours a service's name on a terminal)."""
    return strip_ansi(line) if "\x1b" in line else line


def _service(line: str) -> re.Match[str] | None:
    # Every line asks: most start with neither a tag nor what a paste puts before it.
    if (
        "|" not in line
        and line[:1] not in _TAG_STARTS
        and not line[:1].isdigit()
        and line.find("\t", 0, 65) < 0  # (GNU parallel's tag: a name, a tab)
    ):
        return None
    return _SERVICE.match(line)


def _name(found: re.Match[str]) -> str | None:
    tag = found.group("tag")
    if tag is None:
        return found.group("name") or found.group("tab")
    return None if tag.lower() in _NOT_SERVICES else tag
