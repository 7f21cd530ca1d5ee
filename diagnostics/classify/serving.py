"""A server at work: the tail of a log whose ready marker was not kept.

A paste of a running server's last lines (``kubectl logs --tail=20``, the stats lines
under an issue about throughput) has no ready marker and no failure; read line by line
it is a start that has not begun ("starting"). vLLM prints some lines only once it
serves: its request stats ("Avg prompt throughput: ..."), uvicorn's access lines for
its routes, its request log. The rule pack lists them as the ``serving`` phase
(rules/00-phases.yaml); they are not in the line scan (hours of request logs stay lines
that no pattern matches, which the fast path skips unread), so they are read here, on
the last lines of a log whose verdict is a start under way
(:func:`diagnostics.scanning.scan.classify_stream` reads them from the file,
:func:`diagnostics.classify.classifier.classify_lines` from its lines). The worker does
not need them: it asks the server itself whether it is up.

Walking back from the end, the first line that is either a serving line or a progress
marker of a start under way (a version line, a load, a download) decides: a serving
line means the server was up when the log ends; a start marker means a start under
way after whatever served before it (a restart), as the line scan found. Lines of
another compose service (a web UI's own ``"GET /health" 200``) do not count
(:mod:`diagnostics.classify.services`)."""

from __future__ import annotations

from collections.abc import Sequence

from diagnostics.classify.normalize import normalize
from diagnostics.classify.services import Services
from diagnostics.model import Diagnosis, State
from diagnostics.pack.rules import RulePack

UNDER_WAY = frozenset({State.STARTING, State.DOWNLOADING, State.LOADING})
TAIL_BYTES = 64 * 1024  # how much of a log's end is read


def serving(lines: Sequence[str], pack: RulePack) -> bool:
    """Whether the last of ``lines`` (a log's last lines, raw) that shows either a
    serving server or a start under way shows a serving server."""
    if not pack.serving:
        return False
    services = Services()
    for line in lines:  # learn which compose services are vLLM's
        services.foreign(line)
    for line in reversed(lines):
        if not line.strip() or services.foreign(line):
            continue
        text = normalize(line)
        if any(rx.search(text) for rx in pack.under_way):
            return False
        if any(rx.search(text) for rx in pack.serving):
            return True
    return False


def tail_of(lines: Sequence[str]) -> Sequence[str]:
    """The last lines of ``lines`` that fit in ``TAIL_BYTES`` (what a file's tail gives)."""
    size, at = 0, len(lines)
    while at > 0 and size + len(lines[at - 1]) + 1 <= TAIL_BYTES:
        at -= 1
        size += len(lines[at]) + 1
    return lines[at:]


def with_serving(verdict: Diagnosis, tail: Sequence[str], pack: RulePack) -> Diagnosis:
    """``verdict``, or ready when it is a start under way and ``tail`` (the log's last
    lines) shows the server at work."""
    if verdict.state in UNDER_WAY and serving(tail, pack):
        return Diagnosis(State.READY)
    return verdict
