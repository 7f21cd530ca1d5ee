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
:func:`diagnostics.attempts.lines.classify_lines` from its lines). The worker does
not need them: it asks the server itself whether it is up.

Walking back from the end, the first line that is either a serving line or a progress
marker of a start under way (a version line, a load, a download) decides: a serving
line means the server was up when the log ends; a start marker means a start under
way after whatever served before it (a restart), as the line scan found. Lines of
another compose service (a web UI's own ``"GET /health" 200``) do not count
(:mod:`diagnostics.classify.services`).

A log that begins while the server serves may hold a request's error: a traceback in a
request handler, an ERROR line about a model name the server does not know. Without the
ready marker, line by line it is a failed start of no named cause (an exception family, a
bare exception, the log's shape, a message judged by the catalogue or by where it was
raised). When vLLM's serving lines follow that error in the log's last lines, with no
start between them, vLLM served on after it: the server is up (:func:`served_after`); so
is an error a request handler logged after serving lines (a request refused, the last
thing the paste kept). A named cause, a consequence (an engine that died) or another
error after the last serving line stays a failure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from diagnostics.classify.linereading import hit_ids
from diagnostics.classify.normalize import clean_raw, normalize
from diagnostics.classify.services import Services
from diagnostics.model import Diagnosis, Evidence, State
from diagnostics.pack.rules import RulePack

UNDER_WAY = frozenset({State.STARTING, State.DOWNLOADING, State.LOADING})
TAIL_BYTES = 64 * 1024  # how much of a log's end is read


def serving(lines: Sequence[str], pack: RulePack) -> bool:
    """Whether the last of ``lines`` (a log's last lines, raw) that shows either a
    serving server or a start under way shows a serving server."""
    for _at, _line, mark in marked(lines, pack):
        if mark is not None:
            return mark is _SERVING
    return False


def served_after(evidence: Evidence, tail: Sequence[str], pack: RulePack) -> bool:
    """Whether the ``evidence`` line is among ``tail`` (a log's last lines, raw) and
    vLLM's serving lines come after it, with no start under way between them: a
    request's error in a server at work. An error a request handler raised or logged
    (the OpenAI server's ``serving_chat.py``, ``serving_engine.py``..., in its log
    header or its traceback's frames, between the error and the serving lines above it)
    may also come last: serving lines before it, with no start between, show the server
    at work too (a request refused for its length, the last thing a paste kept)."""
    served, found, handler = False, False, False
    for _at, line, mark in marked(tail, pack):
        if not found and clean_raw(line) == evidence.text:
            if served:
                return True
            found = True
        elif mark is _UNDER_WAY:
            return False
        elif mark is _SERVING and found:
            return handler
        served = served or mark is _SERVING
        handler = handler or (found and _REQUEST_HANDLER.search(line) is not None)
    return False  # the error is above the lines read: not known to be followed


# The OpenAI server's request handlers (serving_chat.py, serving_completion.py,
# serving_engine.py, serving_embedding.py...), as a log header or a traceback frame names
# them.
_REQUEST_HANDLER = re.compile(r"\bserving_\w+\.py\b")


_SERVING, _UNDER_WAY = "serving", "under way"


def marked(lines: Sequence[str], pack: RulePack) -> Iterator[tuple[int, str, str | None]]:
    """vLLM's lines of ``lines`` (not another compose service's, not blank), last first,
    each with its index and what it shows: a start under way, a server at work, or
    neither (None)."""
    if not pack.serving:
        return
    services = Services()
    for line in lines:  # learn which compose services are vLLM's
        services.foreign(line)
    for at in range(len(lines) - 1, -1, -1):
        line = lines[at]
        if not line.strip() or services.foreign(line):
            continue
        text = normalize(line)
        encoded = text.encode("utf-8", "surrogateescape")
        hits = hit_ids(pack, encoded) & pack.under_way
        if any(pack.patterns[i].regex.search(encoded) for i in hits):
            yield at, line, _UNDER_WAY
        elif any(rx.search(text) for rx in pack.serving):
            yield at, line, _SERVING
        else:
            yield at, line, None


def names_no_cause(verdict: Diagnosis, pack: RulePack) -> bool:
    """A failure of generic structure, a bare exception (a rule counted only before
    ready), the log's shape, or one judged by the catalogue or provenance; not a
    specific cause or a consequence."""
    if not verdict.failed:
        return False
    rule = pack.verdicts_rule(verdict.rule)  # None: a shape (unmatched.py) or derived
    return rule is None or rule.kind == "structure" or rule.before_ready


def tail_of(lines: Sequence[str]) -> Sequence[str]:
    """The last lines of ``lines`` that fit in ``TAIL_BYTES`` (what a file's tail gives)."""
    size, at = 0, len(lines)
    while at > 0 and size + len(lines[at - 1]) + 1 <= TAIL_BYTES:
        at -= 1
        size += len(lines[at]) + 1
    return lines[at:]


def with_serving(
    verdict: Diagnosis, tail: Callable[[], Sequence[str]], pack: RulePack
) -> Diagnosis:
    """``verdict``, or ready when it is a start under way and the log's last lines
    (``tail()``, read only for such a verdict) show the server at work, or a failure of
    no named cause that the server served on after."""
    if verdict.state in UNDER_WAY:
        return Diagnosis(State.READY) if serving(tail(), pack) else verdict
    evidence = verdict.evidence
    if evidence and names_no_cause(verdict, pack) and served_after(evidence, tail(), pack):
        return Diagnosis(State.READY)
    return verdict
