"""Several runs in one file (``diagnostics.attempts.last.after_run_ended``): the last
reports that a run ended (a platform's exit report, a shell prompt printing another log
or running vLLM again), found reading the file backwards, their line numbers counted
from where the file's classifier began, and the runs after them classified."""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from diagnostics.attempts.last import RUN_ENDS_READ, after_run_ended, rerun_command
from diagnostics.classify.classifier import Classifier, following
from diagnostics.model import Diagnosis
from diagnostics.scanning.attemptseek import attempt_before, last_run_ends, next_line
from diagnostics.scanning.readyseek import count_lines

ClassifyFile = Callable[[BinaryIO, int, Classifier, int], tuple[int, int]]


def after_runs(
    stream: BinaryIO,
    start: int,
    verdict: Diagnosis,
    restart: tuple[int, int],
    classifier: Classifier,
    block_size: int,
    classify_file: ClassifyFile,
) -> Diagnosis:
    """``verdict`` (the file's, whose classifier began at ``restart``: offset, lines
    before), or a later run's (``classify_file``: the fast path from an offset)."""
    pack = classifier.pack
    offsets = last_run_ends(stream, start, pack, RUN_ENDS_READ)
    if not offsets:
        return verdict
    # counted from the restart point (the last ready marker): a report above it is
    # above every failure that counts (line 0)
    offset, before_it = restart
    lines, at_line, at = [], before_it + 1, offset
    for end in offsets:
        if end >= offset:
            at_line += count_lines(stream, at, end)
            at = end
        lines.append(at_line if end >= offset else 0)
    after = {line: next_line(stream, at) for line, at in zip(lines, offsets, strict=True) if line}
    reruns = {}
    for line, at in zip(lines, offsets, strict=True):
        if line:
            stream.seek(at)
            run = rerun_command(stream.read(after[line] - at).decode("utf-8", "replace"), pack)
            if run is not None:
                reruns[line] = run

    def classify_after(line: int) -> Diagnosis:
        later = following(classifier)
        classify_file(stream, after[line], later, block_size)
        return later.diagnosis()

    def started_before(line: int) -> bool:
        return attempt_before(stream, start, pack, line, block_size)

    return after_run_ended(verdict, lines, pack, classify_after, reruns, started_before)
