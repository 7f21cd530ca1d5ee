"""Time spent in each phase of a cold start, for the summary event. Pure: the caller
passes the clock readings and the output lines.

vLLM's own timings (torch.compile, graph capture, weight download) are read with the
rule pack's phase markers that capture them: a marker with a named group
``compile_s``, ``capture_s`` or ``download_s`` (``rules/00-phases.yaml``). The pack is
the one place that knows vLLM's wording.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from diagnostics import RulePack
from diagnostics.pack.matching import Regex

TIMINGS = frozenset({"compile_s", "capture_s", "download_s"})


def timing_markers(pack: RulePack) -> tuple[Regex, ...]:
    """The pack's phase markers that capture one of vLLM's own timings."""
    return tuple(
        regex
        for phase in pack.phases
        for regex in phase.patterns
        if TIMINGS & set(regex.groupindex)
    )


@dataclass
class ColdStartClock:
    started: float
    markers: Sequence[Regex] = ()
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
        for marker in self.markers:
            match = marker.search(text)
            if match is None:
                continue
            for name, value in match.groupdict().items():
                if value is None or name not in TIMINGS:
                    continue
                try:
                    seconds = float(value)
                except ValueError:
                    continue
                if name == "download_s":
                    self.reported_download_s = seconds
                else:
                    self.compile_s += seconds

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
