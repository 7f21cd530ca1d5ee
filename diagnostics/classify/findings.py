"""The failure matches the classifier keeps: the best rule's first match (the
evidence, with the lines that continue it), a ``before_ready`` match after ready,
and the captures a match's messages read."""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnostics.classify.progress import Progress
from diagnostics.model import State
from diagnostics.pack.rules import Rule
from diagnostics.redaction.redact import truncate

MAX_STORED_LINE = 4096
_CONTINUATION_LINES = 2


def stored(line: str) -> str:
    """A line as kept for evidence and the tail: cut where no secret splits (a cut
    secret would no longer be recognised by the redactor)."""
    return line if len(line) <= MAX_STORED_LINE else truncate(line, MAX_STORED_LINE)


@dataclass
class Hit:
    rule: Rule
    line: int
    raw: str
    text: str
    following: list[str] = field(default_factory=list)


class Findings:
    """The best match so far, the match still collecting continuation lines, and a
    late (``before_ready`` after ready) match."""

    def __init__(self) -> None:
        self.best: Hit | None = None
        self.collecting: Hit | None = None
        self.late: Hit | None = None

    def consider(self, rule: Rule, clean: str, text: str, line: int, progress: Progress) -> None:
        if progress.stopping and rule.generic:
            return
        if rule.traceback_through and rule.priority not in progress.frames:
            return
        if rule.after and rule.priority not in progress.after:
            return
        if self.best is not None and self.best.rule.priority <= rule.priority:
            return
        if rule.before_ready and progress.phase is State.READY:
            # A bare error after ready (a failed request) is not the end of vLLM; it
            # only names the cause once vLLM exited.
            if self.late is None:
                self.late = Hit(rule, line, stored(clean), stored(text))
            return
        self.best = self.collecting = Hit(rule, line, stored(clean), stored(text))

    def collect(self, line: str, text: str) -> None:
        """Keep up to two continuation lines after the evidence (terminal wraps);
        ``text``: the line normalised."""
        assert self.collecting is not None
        if line == text and len(self.collecting.following) < _CONTINUATION_LINES:
            self.collecting.following.append(stored(text))
        else:
            self.collecting = None


def captures(hit: Hit) -> dict[str, str]:
    """What the rule's patterns capture on the evidence and its continuation lines."""
    texts = [hit.text]
    for n in range(1, len(hit.following) + 1):
        texts.append(hit.text + "".join(hit.following[:n]))
        texts.append(" ".join([hit.text, *hit.following[:n]]))
    found: dict[str, str] = {}
    for regex in hit.rule.patterns:
        for text in texts:
            match = regex.search(text)
            if not match:
                continue
            for name, value in match.groupdict().items():
                if value is not None and name not in found:
                    found[name] = value
    return found
