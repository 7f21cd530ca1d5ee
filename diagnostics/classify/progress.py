"""Where a start stands, as the classifier tracks it: the phase vLLM reported, a
requested shutdown, a traceback under way, the traceback frames and ``after``
markers seen since the last ready marker, and what phase markers captured."""

from __future__ import annotations

from diagnostics.model import State
from diagnostics.pack.rules import PHASES, Pattern


class Progress:
    """The phase and the traceback state of one log (see :class:`Classifier`)."""

    def __init__(self) -> None:
        self.phase = State.STARTING
        self.stopping = False
        self.traceback: int | None = None  # line of a traceback start after the last ready
        self.frames: set[int] = set()  # rules whose traceback frames were seen
        self.after: set[int] = set()  # rules whose `after` markers were seen
        self.context: dict[str, str] = {}  # named captures of phase markers (the version)

    def saw(self, pattern: Pattern, text: str, lineno: int) -> None:
        """A traceback header, a traceback line, a frame or an ``after`` marker hit."""
        if pattern.kind == "traceback":
            self.frames.clear()
            if not self.stopping and self.phase is not State.READY:
                self.traceback = lineno
        elif pattern.kind == "traceback_body":
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

    def enter(self, name: str) -> State | None:
        """A phase marker named ``name``; the new phase when it changed."""
        if name == "stopping":
            self.stopping = True
            return None
        state = PHASES[name]
        assert state is not None  # only "stopping" has none, handled above
        if state is State.STARTING and self.phase is not State.READY:
            return None  # the start under way announcing itself: nothing changes
        self.traceback = None  # the start went on after any traceback seen so far
        if state is State.READY:
            # Nothing seen before bears on what follows (diagnose reads a log from its
            # last ready marker on): traceback frames and `after` markers are forgotten.
            self.stopping = False
            self.frames.clear()
            self.after.clear()
        if state is self.phase:
            return None
        self.phase = state
        return state
