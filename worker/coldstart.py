"""Time spent in each phase of a cold start, for the summary event. Pure: the caller
passes the clock readings and the output lines."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_COMPILE = re.compile(r"torch\.compile took (?P<s>[\d.]+) ?s")
_CAPTURE = re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs")
_DOWNLOAD = re.compile(r"Time spent downloading weights for .*?: (?P<s>[\d.]+) seconds")


@dataclass
class ColdStartClock:
    started: float
    phase: str = "starting"
    entered: float = 0.0
    spent: dict[str, float] = field(default_factory=dict)
    compile_s: float = 0.0
    reported_download_s: float | None = None

    def __post_init__(self) -> None:
        self.entered = self.started

    def enter(self, phase: str, now: float) -> float:
        """Switch phase; returns the seconds spent in the phase that ended."""
        spent = now - self.entered
        self.spent[self.phase] = self.spent.get(self.phase, 0.0) + spent
        self.phase, self.entered = phase, now
        return spent

    def line(self, text: str) -> None:
        for pattern in (_COMPILE, _CAPTURE):
            match = pattern.search(text)
            if match:
                self.compile_s += float(match["s"])
        match = _DOWNLOAD.search(text)
        if match:
            self.reported_download_s = float(match["s"])

    def summary(self, now: float) -> dict[str, float]:
        spent = dict(self.spent)
        spent[self.phase] = spent.get(self.phase, 0.0) + (now - self.entered)
        download = spent.get("downloading", 0.0)
        if self.reported_download_s is not None:
            download = max(download, self.reported_download_s)
        return {
            "download_s": round(download, 2),
            "load_s": round(spent.get("loading", 0.0), 2),
            "compile_capture_s": round(self.compile_s, 2),
            "total_s": round(now - self.started, 2),
        }
