"""A log of several files under ``tail``'s or ``head``'s headers (``==> vllm.out <==``):
whose a line is shows only in the header above it (:mod:`diagnostics.classify.services`),
which the fast path may skip and its restart at the last ready marker never reads. So
such a log is read line by line, in order, as the worker's path reads vLLM's output
(:func:`diagnostics.classify.classifier.classify_lines`): whole up to
``WHOLE_UP_TO``, and past that fed to one classifier as it comes (in bounded memory,
without the look at several attempts)."""

from __future__ import annotations

import re

from diagnostics.classify.classifier import Classifier, classify_lines
from diagnostics.classify.services import SECTION
from diagnostics.model import Diagnosis
from diagnostics.pack.rules import RulePack
from diagnostics.scanning.streams import MAX_LINE, Reader

# A header at the start of a line of the first 64 kB: services.SECTION, in bytes.
_HEADER = re.compile(SECTION.pattern.encode(), re.MULTILINE)
WHOLE_UP_TO = 32 << 20


def sectioned(first: bytes) -> bool:
    """Whether the first block holds a ``tail``/``head`` header (a cheap test first)."""
    head = first[:65536]
    return b"==> " in head and _HEADER.search(head) is not None


def classify_sections(first: bytes, reader: Reader, pack: RulePack, block_size: int) -> Diagnosis:
    data = first + reader.read(max(WHOLE_UP_TO - len(first), 0))
    more = reader.read(1)
    if not more:
        return classify_lines(_lines(data), pack)
    classifier = Classifier(pack)
    number = 0
    rest = data + more
    while rest:
        *whole, rest = rest.split(b"\n")
        for line in whole:
            number += 1
            classifier.feed(line.decode("utf-8", "replace"), number)
        if len(rest) > MAX_LINE:  # a line with no end in sight: read as pieces
            number += 1
            classifier.feed(rest[:MAX_LINE].decode("utf-8", "replace"), number)
            rest = rest[MAX_LINE:]
        block = reader.read(block_size)
        if not block:
            if rest:
                classifier.feed(rest.decode("utf-8", "replace"), number + 1)
            break
        rest += block
    return classifier.diagnosis()


def _lines(data: bytes) -> list[str]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return [line.decode("utf-8", "replace") for line in lines]
