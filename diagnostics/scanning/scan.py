"""Classify a whole log read from a binary stream, fast and in bounded memory.

The stream is read in blocks; Hyperscan scans each block for every pattern of the
pack at once, and only the lines that can change the verdict go through
normalisation and the classifier (:mod:`diagnostics.scanning.fastpath`): lines a pattern may
match, lines with colour codes or a lone carriage return, lines cut at a terminal's
width, and the lines after one of those while the classifier wants them. A file is
read from its last ready marker on, found by reading it backwards (a pipe is copied to
a temporary file first); a block in which nothing can change the verdict any more is
skipped unread. The result is the same as feeding every line to the classifier.

Memory is bounded and time linear whatever the input: a line longer than
``streams.MAX_LINE`` is read as pieces (as the worker reads vLLM's pipe), UTF-16/32
logs are decoded, CR-only logs use CR as line end (see :mod:`diagnostics.formats.streams`).

RunPod's console exports list the newest line first, and so do other collectors'
exports (CloudWatch Logs Insights, gcloud logging read: their timestamps go back in
time); such a log is detected from its first lines and read back to front, through a
temporary file, whatever its size.
"""

from __future__ import annotations

import codecs
import io
from functools import cache, partial
from typing import BinaryIO

from diagnostics.attempts.decisive import decisive
from diagnostics.attempts.last import last_attempt_verdict
from diagnostics.classify.chosen import went_further
from diagnostics.classify.classifier import Classifier, knowing, reached
from diagnostics.classify.serving import TAIL_BYTES
from diagnostics.classify.unmatched import with_tail
from diagnostics.formats.order import console_head, going_back, looks_reversed, reversed_lines
from diagnostics.formats.streams import blocks, decoded, record_times, seekable
from diagnostics.model import Diagnosis, State
from diagnostics.pack.rules import RulePack
from diagnostics.scanning import fastpath
from diagnostics.scanning.attemptseek import (
    after_line,
    attempt_before,
    attempt_starts,
    last_attempt,
)
from diagnostics.scanning.pasted import read_whole
from diagnostics.scanning.runs import after_runs
from diagnostics.scanning.sections import classify_sections, sectioned

BLOCK_SIZE = 256 * 1024  # glibc keeps blocks this size on the heap: no page faults per block
# A log this big is first judged by its last attempt alone (a crash loop captured):
# ``_last_attempt_alone``. Smaller logs are read whole first, as they always were.
LAST_ATTEMPT_FIRST_ABOVE = 64 << 20
# A log this big that is one text repeated is judged from a few repetitions
# (:mod:`diagnostics.scanning.repeats`).
REPEATED_ABOVE = 64 << 20
_FIRST_ATTEMPT_WITHIN = 8 << 20  # where a big log's first attempt must begin (read whole)
_DETECT_SIZE = 8 * 1024 * 1024  # how much of a console export the order check reads


class InputError(Exception):
    """Raised when an input cannot be classified (empty or binary)."""


def classify_stream(
    stream: BinaryIO,
    pack: RulePack,
    *,
    block_size: int = BLOCK_SIZE,
    shown: frozenset[int] = frozenset(),  # settings the paste shows anywhere (progress)
) -> Diagnosis:
    raw = stream.read(block_size)
    first, reader = decoded(raw, stream, block_size)
    if not first:
        raise InputError("empty input")
    if b"\x00" in first[:65536]:
        raise InputError("binary input (NUL bytes), not a text log")
    classifier = knowing(shown, pack)
    if console_head(first) and len(first) < _DETECT_SIZE:
        # The order is judged on the first _DETECT_SIZE bytes, whatever the block size.
        first += reader.read(_DETECT_SIZE - len(first))
    times = record_times(reader)
    if looks_reversed(first) or (times is not None and going_back(times)):
        for lineno, line in reversed_lines(first, reader, block_size):
            # Evidence line numbers refer to the file as given.
            classifier.feed(line.decode("utf-8", "replace"), lineno)
        return classifier.diagnosis()
    if sectioned(first):  # several files under tail's headers: line by line
        return classify_sections(first, reader, pack, block_size)
    if reader is not stream:  # decoded (UTF-16/32, CR line ends): read as it comes
        fastpath.classify_blocks(blocks(first, reader, block_size), classifier)
    elif seekable(stream):
        start = stream.tell() - len(first)
        return _classify_attempts(stream, start, classifier, block_size, shown)
    else:
        # A pipe cannot be read backwards: copied to a temporary file first (as a console
        # export is), in blocks.
        import shutil  # only for a pipe: the imports cost more than a small log
        import tempfile

        bom = raw[: len(raw) - len(raw.removeprefix(codecs.BOM_UTF8))]
        with tempfile.TemporaryFile() as spool:
            spool.write(bom + first)
            shutil.copyfileobj(stream, spool, block_size)
            return _classify_attempts(spool, len(bom), classifier, block_size, shown)
    return classifier.diagnosis()


def _classify_attempts(
    stream: BinaryIO,
    start: int,
    classifier: Classifier,
    block_size: int,
    shown: frozenset[int] = frozenset(),
) -> Diagnosis:
    """The file's verdict (:func:`_last_attempt_of_file`), or a later run's after the
    platform reported the run that failed so ended (:func:`runs.after_runs`); a small
    paste read whole (:mod:`pasted`: attempts pasted newest first, a setting shown after
    the failure)."""
    pack = classifier.pack
    read = lambda: _attempts_and_runs(stream, start, classifier, block_size)  # noqa: E731
    again = partial(classify_stream, pack=pack, block_size=block_size)
    return read_whole(stream, start, pack, shown, read, lambda data, k: again(data, shown=k))


def _attempts_and_runs(
    stream: BinaryIO, start: int, classifier: Classifier, block_size: int
) -> Diagnosis:
    verdict, restart = _last_attempt_of_file(stream, start, classifier, block_size)
    if not verdict.failed or restart is None:
        return verdict  # (a big crash loop judged by its last attempt or repetitions)
    return after_runs(stream, start, verdict, restart, classifier, block_size, _classify_file)


def _last_attempt_of_file(
    stream: BinaryIO, start: int, classifier: Classifier, block_size: int
) -> tuple[Diagnosis, tuple[int, int] | None]:
    """The file's verdict; of several attempts, the last one's failure
    (:mod:`diagnostics.attempts.last`). The cheap questions first: an attempt began
    before the verdict's evidence (vLLM's first start is near the top), and one after it
    (read backwards from the end); the lines are counted from the last ready marker
    (where the whole file's classifier began: offset, lines before; None for a big log
    judged otherwise)."""
    pack = classifier.pack
    alone = _last_attempt_alone(stream, start, pack, block_size)
    if alone is not None:
        return alone, None
    end = stream.seek(0, 2)
    if end - start > REPEATED_ABOVE:
        # a big log's only: a small one does not import it
        from diagnostics.scanning.repeats import repeated_verdict

        again = repeated_verdict(
            stream, start, end, lambda data: classify_stream(io.BytesIO(data), pack)
        )
        if again is not None:
            return again, None
    offset, lines = _classify_file(stream, start, classifier, block_size)
    restart = (offset, lines)
    # a server at work whose ready marker was cut off, or a request's error in one
    verdict = with_tail(
        classifier.diagnosis(),
        lambda: _tail(stream, start),
        pack,
        classifier.redact,
        lambda: _tail_line(stream, start),
    )
    if not verdict.failed or verdict.evidence is None:
        return verdict, restart
    first = verdict.evidence.line
    at = last_attempt(stream, start, pack, block_size)
    if at is None or at < offset:  # none after the last ready marker: the verdict's
        return verdict, restart
    line = lines + fastpath.count_lines(stream, offset, at) + 1

    @cache  # read once, for its verdict and, if asked, how far it got
    def last_read() -> Classifier:
        later = Classifier(pack)
        _classify_file(stream, at, later, block_size)
        return later

    def classify_from() -> Diagnosis:
        return last_read().diagnosis()

    def answered() -> bool:  # the earlier failure, where it was found; the last attempt
        where = after_line(stream, offset, first - lines, at)
        if where is None:
            return False
        failed = _region_read(stream, offset, where, pack, block_size)
        return went_further(reached(failed), reached(last_read()), verdict.category)

    def before(line: int) -> bool:
        return attempt_before(stream, start, pack, line, block_size)

    def furthest() -> State:
        return last_read().furthest

    verdict = last_attempt_verdict(verdict, line, pack, classify_from, before, answered, furthest)
    return verdict, restart


def _last_attempt_alone(
    stream: BinaryIO, start: int, pack: RulePack, block_size: int
) -> Diagnosis | None:
    """A big log's verdict read from its last attempt alone, or None to read it whole.

    The whole log's verdict would be this one: of several attempts, the last one's own
    cause replaces a cause an earlier attempt shows (``last_attempt_verdict``), and a
    cause inside the last attempt is found reading that attempt alone. Three conditions
    keep it so: attempts begin before the last (near the top: a failure before vLLM's
    first start, a download step's, stands, so nothing before the first attempt may
    fail); the last attempt names a cause of its own (else the whole log's verdict is
    read, as for any log); and the first attempt alone fails the same way (a crash loop:
    the same failure repeated, so no earlier line the last attempt lacks, such as an
    offline setting printed once, decides). A crash loop of 500 MB is then read at its
    last attempt, not in every block its repeated failure lines make relevant."""
    end = stream.seek(0, 2)
    if end - start <= LAST_ATTEMPT_FIRST_ABOVE:
        return None
    at = last_attempt(stream, start, pack, block_size)
    begins = attempt_starts(stream, start, pack, _FIRST_ATTEMPT_WITHIN)
    if at is None or len(begins) < 2 or begins[1] > at:
        return None
    first, second = begins[:2]
    if _region(stream, start, first, pack, block_size).failed:
        return None
    later = Classifier(pack)
    _classify_file(stream, at, later, block_size)
    verdict = later.diagnosis()
    if not decisive(verdict, pack):
        return None
    opening = _region(stream, first, second, pack, block_size)
    if (opening.rule, opening.state) != (verdict.rule, verdict.state):
        return None  # not the same failure repeated: read whole
    assert verdict.evidence is not None
    line = verdict.evidence.line + fastpath.count_lines(stream, start, at)
    return verdict._replace(evidence=verdict.evidence._replace(line=line))


def _region(stream: BinaryIO, begin: int, end: int, pack: RulePack, block_size: int) -> Diagnosis:
    """The verdict of the bytes ``begin`` to ``end`` alone (at most a few MiB)."""
    return _region_read(stream, begin, end, pack, block_size).diagnosis()


def _region_read(
    stream: BinaryIO, begin: int, end: int, pack: RulePack, block_size: int
) -> Classifier:
    """A classifier that read the bytes ``begin`` to ``end`` alone."""
    stream.seek(begin)
    classifier = Classifier(pack)
    data = stream.read(end - begin)
    fastpath.classify_blocks(blocks(data, io.BytesIO(), block_size), classifier)
    return classifier


def _tail(stream: BinaryIO, start: int) -> list[str]:
    """The whole lines of the last ``TAIL_BYTES`` of a file whose text begins at ``start``."""
    end = stream.seek(0, 2)
    at = max(start, end - TAIL_BYTES)
    stream.seek(at)
    lines = stream.read(end - at).decode("utf-8", "replace").splitlines()
    return lines[1:] if at > start else lines  # the first one read may be cut


def _tail_line(stream: BinaryIO, start: int) -> int:
    """The number of the first line :func:`_tail` gives."""
    at = max(start, stream.seek(0, 2) - TAIL_BYTES)
    before = fastpath.count_lines(stream, start, at)
    return before + (2 if at > start else 1)  # the line ``at`` is in was dropped


def _classify_file(
    stream: BinaryIO, start: int, classifier: Classifier, block_size: int
) -> tuple[int, int]:
    """A file (not a pipe): classify from the last ready marker on, which gives the
    verdict of the whole file (:mod:`diagnostics.scanning.fastpath`); where it began
    (offset, lines before)."""
    pack = classifier.pack
    plan = fastpath.plan(stream, start, pack, block_size)
    restart = plan.restart
    offset, lines = (restart.offset, restart.lines) if restart is not None else (start, 0)

    def recount(begin: int, end: int) -> int:
        here = stream.tell()
        try:
            return fastpath.count_lines(stream, offset + begin, offset + end)
        finally:
            stream.seek(here)

    stream.seek(offset)
    data = blocks(stream.read(block_size), stream, block_size)
    stop = max(plan.quiet_from - offset, 0)
    fastpath.classify_blocks(data, classifier, lines, recount, stop, exits=plan.left)
    names = fastpath.needed_context(classifier)
    if names:  # the version...: its last value, wherever it is (lines were skipped)
        end = stream.seek(0, 2)
        classifier.recall(fastpath.context_before(stream, start, end, pack, names))
    return offset, lines
