"""Where a start stands, as the classifier tracks it: the phase vLLM reported, a
requested shutdown, a traceback under way, the traceback frames and ``after``
markers seen since the last ready marker, what phase markers captured, the traceback
chain under way and the innermost frame of vLLM, transformers, huggingface_hub, torch or
the model repository's own code it shows (where its exception was raised: provenance)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from diagnostics.model import Category, State
from diagnostics.pack.evidence import REPOSITORY_CODE, project_path
from diagnostics.pack.rules import PHASES, Pattern

if TYPE_CHECKING:  # (findings imports this module)
    from diagnostics.classify.findings import Hit

# A frame line, standard or IPython's; an IPython header with the exception's class.
_FRAME = re.compile(
    r'^\s*File (?:"(?P<path>[^"]+)", line \d+|(?P<ipath>[~/.\w][^\s:]*\.py):\d+), '
    r"in (?P<func>[\w.<>]+)"
)
_SITE_PACKAGES = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_RAISE = re.compile(r"^\s+raise (?P<cls>[A-Za-z_][\w.]*)")
_ASSERT = re.compile(r"^\s+assert (?P<expr>\S.*?)\s*$")
# A generic attribute accessor raises for whatever its caller asked of an object: the
# caller's lookup, so the caller's frame stays the origin (transformers' tokenizer
# ``__getattr__`` under a repository's tokenizer, or vLLM's, asking what it dropped).
_ACCESSORS = frozenset({"__getattr__", "__getattribute__"})
_HEADER_CLASS = re.compile(r"^\s*(?:[\w.]+\.)?(?P<cls>[A-Z]\w*)\s{2,}Traceback \(most recent")
# The outermost frame of vLLM's own program (`vllm serve`'s script, a vLLM module run
# as a script, `python -m`'s runner): a traceback from there left the program.
_VLLM_MAIN = re.compile(
    r"(?:^|/)vllm(?:/entrypoints/\S*\.py)? <module>$"
    r"|(?:(?:^|/)runpy\.py|^<frozen runpy>) _run_module_as_main$"
)
_PROGRAM_TOP = frozenset({"<module>", "_run_module_as_main"})  # a main thread's first frame

# A frame in vLLM's own code (its package, or the `vllm` script).
_VLLM_CODE = re.compile(r"[/\\]vllm(?:[/\\]|$)")


class Origin(NamedTuple):
    """Where an exception was raised: a project-relative path and function (from a
    frame), or the file name vLLM's log prefix gives (function empty)."""

    path: str
    function: str = ""
    header_class: str = ""  # the class an IPython header shows
    raised: str = ""  # the class of a ``raise X(`` code line right under the frame
    asserted: str = ""  # the expression of an ``assert`` code line right under it
    under_repository: bool = False  # a frame of the model repository's code called it
    # a third-party package's frame (site-packages, outside the four projects) under it:
    # the exception was raised in that package, not in this frame's code
    in_library: bool = False
    accessed: str = ""  # the project whose accessor raised for this frame's lookup

    @property
    def in_repository(self) -> bool:
        """Whether this frame is the model repository's own code (transformers_modules)."""
        return self.path.startswith(f"{REPOSITORY_CODE}/")


_SETTINGS_KEPT = 1 << 14  # characters of an attempt's logged settings kept


class Progress:
    """The phase and the traceback state of one log (see :class:`Classifier`)."""

    def __init__(self, shown: frozenset[int] = frozenset()) -> None:
        self.phase = State.STARTING
        self.shown = shown  # rules whose settings the paste shows anywhere (settings_shown)
        self.service: str | None = None  # the service (or tail's file) of the line read
        self.stopping = False  # a requested shutdown began (until a new start's marker)
        self.traceback: int | None = None  # line of a traceback start after the last ready
        self.error: int | None = None  # line of the first ERROR-level line since a phase
        self.frames: set[int] = set()  # rules whose traceback frames were seen
        self.after: set[int] = set(shown)  # rules whose `after` markers were seen
        self.context: dict[str, str] = {}  # named captures of phase markers (the version)
        self.settings: dict[str, str] = {}  # what the current attempt logged, by line kind
        self.chain = 0  # tracebacks seen; a chained one keeps the number of the one above
        self._chained = False  # a chain marker since the last traceback header
        self.origin: Origin | None = None  # the innermost project frame of this traceback
        self.outermost = False  # the next frame is a traceback's first
        self.exited = False  # after ready, a traceback left vLLM's program: it ended
        # before ready, a traceback of vLLM's code left its program (`vllm`, `python -m`):
        # a ready marker after it, before a new start's, is another program's (a proxy)
        self.left = False
        self._leaving = False  # this traceback's first frame was a program's main
        self.foreign = False  # this traceback's frames are none of vLLM's, its first no main

    def saw(self, pattern: Pattern, text: str, lineno: int) -> None:
        """A traceback header, a traceback line, a frame or an ``after`` marker hit."""
        if pattern.kind == "traceback":
            self.frames.clear()
            if not self._chained:
                self.chain += 1
            self._chained = False
            header = _HEADER_CLASS.match(text)
            self.origin = Origin("", "", header.group("cls")) if header else None
            self.outermost, self._leaving, self.foreign = True, False, False
            if not self.stopping and self.phase is not State.READY:
                self.traceback = lineno
        elif pattern.kind == "chain":
            self._chained = True
        elif pattern.kind == "traceback_body":
            self.frame(text)
            # A traceback whose header was cut off: its first line seen counts.
            if (
                self.traceback is None
                and not self.stopping
                and self.phase is not State.READY
                and pattern.regex.search(text)
            ):
                self.traceback = lineno
        elif pattern.kind == "frame":
            self.frames.add(pattern.owner)
        elif pattern.kind == "after":
            self.after.add(pattern.owner)

    def error_level(self, lineno: int) -> None:
        """A line logged at level ERROR (or CRITICAL): the first since the last phase
        marker counts, while a start is under way."""
        if self.error is None and not self.stopping and self.phase is not State.READY:
            self.error = lineno

    def frame(self, text: str) -> None:
        """The innermost frame of a project seen so far in this traceback."""
        found = _FRAME.match(text)
        if found is None:
            raised = _RAISE.match(text)
            if raised is not None and self.origin is not None and self.origin.path:
                cls = raised.group("cls").rsplit(".", 1)[-1]
                self.origin = self.origin._replace(header_class="", raised=cls)
            elif self.origin is not None and self.origin.path and (at := _ASSERT.match(text)):
                self.origin = self.origin._replace(asserted=at.group("expr"))
            return
        shown = found.group("path") or found.group("ipath") or ""
        if self.outermost:  # (a thread's first frame, a caller's that caught and logged it)
            self.outermost = False
            self.foreign = found.group("func") not in _PROGRAM_TOP and self.origin is None
            main = _VLLM_MAIN.search(f"{shown} {found.group('func')}")
            self._leaving = main is not None and not self.stopping
            if self._leaving and self.phase is State.READY:
                self.exited = True
        if _VLLM_CODE.search(shown):
            self.foreign = False
            self.left = self.left or (self._leaving and self.phase is not State.READY)
        path = project_path(shown)
        caller = self.origin
        if path is not None and found.group("func") in _ACCESSORS and caller and caller.path:
            # a deeper frame: the caller's code lines above it raised and asserted nothing
            self.origin = caller._replace(raised="", asserted="", accessed=path.split("/")[0])
            return
        if path is not None:
            header = self.origin.header_class if self.origin is not None else ""
            under = caller is not None and (caller.under_repository or caller.in_repository)
            self.origin = Origin(path, found.group("func"), header, under_repository=under)
        elif self.origin is not None and self.origin.path:
            library = _SITE_PACKAGES.search(shown) is not None or self.origin.in_library
            self.origin = self.origin._replace(raised="", asserted="", in_library=library)

    def logged(self, groups: Mapping[str, str | None]) -> None:
        """A phase marker's captures: their last values (``context``); the settings it
        logged, kept by the kind of line (vLLM's arguments as given, ``args``/``model_tag``,
        or ``settings_kind``'s name; its engine's config line, with the values resolved)
        for the current attempt, all kinds joined as ``context``'s (in kinds' order); the
        version line, a start's first, begins them anew."""
        self.context.update({k: v for k, v in groups.items() if v})
        server = groups.get("server")
        if server and not groups.get("settings"):
            self.settings = {}
        if settings := (groups.get("settings") or "")[:_SETTINGS_KEPT]:
            self.settings[server or groups.get("settings_kind") or "config"] = settings
            self.context["settings"] = " ".join(v for _, v in sorted(self.settings.items()))

    @property
    def where(self) -> tuple[State, str | None, tuple[str, int]]:
        """The phase, the last line's service, the last download bar (see Hit.bar)."""
        bar = self.context.get("bar_file", ""), int(self.context.get("downloaded", -1))
        return self.phase, self.service, bar

    def enter(self, name: str) -> State | None:
        """A phase marker named ``name``; the new phase when it changed. A start's marker
        after a requested shutdown is another run (a supervisor's restart, the next try)."""
        if name == "stopping":
            self.stopping = True
            return None
        state = PHASES[name]
        assert state is not None  # only "stopping" has none, handled above
        self.stopping = self.stopping and state is not State.STARTING
        if state is State.STARTING and self.phase is not State.READY:
            return None  # the start under way announcing itself: nothing changes
        self.traceback, self.foreign = None, False  # the start went on after any traceback
        self.error = None  # and after any error it logged
        if state is State.READY:
            # Nothing seen before bears on what follows (diagnose reads a log from its
            # last ready marker on): traceback frames and `after` markers are forgotten.
            self.stopping = self.exited = False
            self.frames.clear()
            self.after = set(self.shown)
        if state is self.phase:
            return None
        self.phase = state
        return state


# vLLM's logger header at a level below ERROR (under any process prefix).
_BELOW_ERROR = re.compile(r"(?:^|[\s|:)\]])(?:WARNING|INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d")


def warned(raw: str) -> bool:
    """Whether a finding's raw line is one vLLM logged below ERROR: a warning whose words
    a rule reads (some of vLLM's warnings are fatal: the start ends after them). When
    the engine's whole initialisation ("init engine (profile, create kv cache, warmup
    model) took", after all its workers') comes after it, it was not: the classifier
    forgets it, as a ready marker forgets what came before. An ERROR line or an
    exception is never forgotten there: another engine (data parallel) may have
    printed it."""
    return _BELOW_ERROR.search(raw) is not None


# The phases of a start in their order (a later one: the start went on).
PHASE_ORDER = (State.STARTING, State.DOWNLOADING, State.LOADING, State.READY)


def outgrown(best: Hit, state: State | None, bar: tuple[str, int] | None = None) -> bool:
    """Whether the start entering ``state`` forgets the verdict ``best``: its rule is
    forgotten when the start goes on (``until_progress``) and ``state`` is later than
    the phase it was found in, or any phase but a new start when it was a notice logged
    below ERROR (a retried request, then the download going on: V1 downloads once the
    load has begun); a warning's generic words (:func:`_words_warned`) by progress in
    that phase or a later one (not a new start); the socket's words and such a notice by
    the interrupted download going on (_went_on); what was logged below ERROR, not raised
    (:func:`_warned_not_raised`), by a later phase; another program's traceback
    (Hit.foreign) by progress in a later phase than starting."""
    if state not in PHASE_ORDER or best.phase not in PHASE_ORDER:
        return False
    at, found = PHASE_ORDER.index(state), PHASE_ORDER.index(best.phase)
    if best.foreign and best.rule.generic and best.rule.category is Category.OTHER:
        return at >= max(1, found)  # another program's traceback, and vLLM went on
    if best.rule.until_progress:  # (a notice logged below ERROR: any progress but a new start)
        went_on = at > found or _went_on(best, state, bar)
        return went_on or (state is not State.STARTING and warned(best.raw))
    if _socket_words(best) and (at > found or _went_on(best, state, bar)):
        return True  # the socket's words in a message, then progress: survived
    if at > found and _warned_not_raised(best):
        return True  # logged as a warning, not raised, then a later phase
    return _words_warned(best) and at >= max(1, found)


def _went_on(best: Hit, state: State, bar: tuple[str, int] | None) -> bool:
    """Whether a download bar (``bar``: file, percent) while ``best``'s downloading shows
    the file of the last bar before it further on ("Trying to resume download...", then
    that bar past where it stopped; its redraw or another file's bar is no sign)."""
    if bar is None or state is not State.DOWNLOADING or best.phase is not state:
        return False
    return best.bar[1] >= 0 and bar[0] == best.bar[0] and bar[1] > best.bar[1]


def _socket_words(best: Hit) -> bool:
    """Generic structure of the network: the socket's words in a log message, not raised
    (raised they are a cause). A library logs them on a request it then retries
    (huggingface_hub's "Error while downloading from ...: Read timed out", then "Trying
    to resume download..."), at whatever level its handler prints, or none: the start
    reaching a later phase after them (the weights loading) survived them."""
    rule = best.rule
    return rule.generic and rule.kind == "structure" and rule.category is Category.NETWORK


# A library's own logger header at WARNING or below before its message ("[2025-10-14
# 09:13:03,402] LMCache WARNING: ...", Python's "WARNING:name:...", "... - WARNING - ...",
# lm-eval's "2024-10-11:14:04:05,870 WARNING  [huggingface.py:1335] ...").
_LIBRARY_WARNED = re.compile(
    r"(?:^|[\s|\]])(?:WARNING|WARN|INFO|DEBUG)(?::|\s+-\s|\s+\[[\w.-]+\.py:\d+\] )"
)


def logged_below_error(raw: str) -> bool:
    """Whether ``raw`` is a line vLLM or a library logged below ERROR, in its logger's
    format: a warning, not a raise."""
    return warned(raw) or _LIBRARY_WARNED.search(raw) is not None


def _warned_not_raised(best: Hit) -> bool:
    """Logged below ERROR, not raised: a network request vLLM or a library could do without
    (LMCache's usage report, a fallen-back lookup), a setting vLLM warned of and accepted
    (VLLM_ALLOW_LONG_MAX_MODEL_LEN's max_model_len; rejected, it raises)."""
    if best.rule.category is Category.BAD_CONFIG:
        return warned(best.raw)
    return best.rule.category is Category.NETWORK and logged_below_error(best.raw)


def _words_warned(best: Hit) -> bool:
    """Generic structure (the socket's words) that vLLM or a library logged below ERROR:
    a retry's notice ("Error while downloading ...: Read timed out", then "Trying to
    resume download..."). Progress after it (the download, the load) outgrew it."""
    return best.rule.generic and best.rule.kind == "structure" and warned(best.raw)
