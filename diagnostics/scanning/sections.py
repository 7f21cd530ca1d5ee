"""A log of several files under ``tail``'s or ``head``'s headers (``==> vllm.out <==``):
whose a line is shows only in the header above it (:mod:`diagnostics.classify.services`),
which the fast path may skip and its restart at the last ready marker never reads. So
such a log is read line by line, in order, as the worker's path reads vLLM's output
(:func:`diagnostics.attempts.lines.classify_lines`): whole up to
``WHOLE_UP_TO``, and past that fed to one classifier as it comes (in bounded memory,
without the look at several attempts)."""

from __future__ import annotations

import re

from diagnostics.attempts.lines import classify_lines
from diagnostics.classify.classifier import Classifier
from diagnostics.classify.services import SECTION, TEST_LINE
from diagnostics.formats.streams import LineSplitter, Reader
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack

# A header at the start of a line of the first 64 kB: services.SECTION, in bytes; a
# test runner's id of a test it begins (services.TEST_LINE), as the classifier reads it.
_HEADER = re.compile(SECTION.pattern.encode(), re.MULTILINE)
_TEST_LINE = re.compile(f"^{TEST_LINE}".encode(), re.MULTILINE)
WHOLE_UP_TO = 32 << 20


def sectioned(first: bytes) -> bool:
    """Whether the first block holds a ``tail``/``head`` header or a test runner's id of
    a test it begins (a cheap test first)."""
    head = first[:65536]
    if b"==> " in head and _HEADER.search(head) is not None:
        return True
    return b".py::" in head and _TEST_LINE.search(head) is not None


def classify_sections(first: bytes, reader: Reader, pack: RulePack, block_size: int) -> Diagnosis:
    data = first + reader.read(max(WHOLE_UP_TO - len(first), 0))
    more = reader.read(1)
    if not more:
        return classify_lines(_lines(data), pack)
    # Past that, the worker's own line cutting (a pipe's): bounded memory, a line longer
    # than MAX_LINE read in pieces cut at a break.
    classifier, splitter, number = Classifier(pack), LineSplitter(), 0
    chunk = data + more
    while chunk:
        for line in splitter.feed(chunk):
            number += 1
            classifier.feed(line.decode("utf-8", "replace"), number)
        chunk = reader.read(block_size)
    for line in splitter.close():
        classifier.feed(line.decode("utf-8", "replace"), number + 1)
    return classifier.diagnosis()


def _lines(data: bytes) -> list[str]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return [line.decode("utf-8", "replace") for line in lines]
