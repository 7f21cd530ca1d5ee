"""What a paste did to a log's text, undone before it is read (``streams.decoded``): a
screenshot's text read back by OCR (gaps between words doubled, a space before a colon),
and HTML escaping (a page's source, an e-mail, a tracker's export: ``&quot;``, ``&#39;``,
``&gt;`` for a reply's quote marker). Each is told from the log's first 64 KiB (of its
first block: 256 KiB unless a test asks for less)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

# A screenshot's text (OCR): gaps between words doubled (in a log, most are one space),
# a space before a colon or comma; read single-spaced, as vLLM printed it.
_GAPS = (re.compile(rb"\S  \S"), re.compile(rb"\S \S"))
_OCR = ((re.compile(rb"(?<=\S)  (?=\S)"), b" "), (re.compile(rb"(?<=[\w\"')]) (?=[:,] )"), b""))
_DOUBLED = re.compile(rb"  (?=\S)")  # the gap first: found by a literal search
_MIN_ENTITIES = 8


@cache  # compiled on first use: most logs hold no "&"
def _entity() -> re.Pattern[bytes]:
    """HTML's entities for what a log holds and a page escapes (quotes, angle brackets,
    the ampersand, a hard space), by name or by number."""
    return re.compile(
        rb"&(?:quot|apos|gt|lt|amp|nbsp|#(?:34|39|60|62|38|x22|x27|x3[ce]|x26));", re.I
    )


def undone(head: bytes) -> list[Callable[[bytes], bytes]]:
    """What to undo on a log whose text begins with ``head``, in order."""
    steps: list[Callable[[bytes], bytes]] = []
    if (gaps := _doubled_gaps(head)) >= 16 and gaps > 4 * len(_GAPS[1].findall(head)):
        steps.append(_single_spaced)
    # escaped: entities where a log has quotes and brackets (more than the raw ones left)
    entities = len(_entity().findall(head)) if b"&" in head else 0
    if entities >= _MIN_ENTITIES and entities > head.count(b'"') + head.count(b"<"):
        steps.append(_Unescaped())
    return steps


def _single_spaced(data: bytes) -> bytes:
    for pattern, by in _OCR:
        data = pattern.sub(by, data)
    return data


class _Unescaped:
    """HTML's character references replaced, read after read (an entity cut at the end
    of one is completed by the next; what is left at the end is passed as it is)."""

    def __init__(self) -> None:
        import html  # only for an escaped log: its table of entities costs 1.4 ms

        self._held, self._unescape = b"", html.unescape
        # an entity cut at the end of what was read: kept for the next read
        self._cut = re.compile(rb"&#?\w{0,8}$")

    def __call__(self, data: bytes) -> bytes:
        end = not data  # the stream's end: what is held is passed
        data, self._held = self._held + data, b""
        if not end and (cut := self._cut.search(data[-10:])):
            data, self._held = data[: len(data) - len(cut.group())], cut.group()
        text = self._unescape(data.decode("utf-8", "surrogateescape"))
        return text.replace("\xa0", " ").encode("utf-8", "surrogateescape")


def _doubled_gaps(data: bytes) -> int:
    """``len(_GAPS[0].findall(data))``, five times faster: each gap followed by a
    non-space, counted when a non-space before it is not the end of the gap counted
    before (findall's matches do not overlap)."""
    count, free = 0, 0  # free: where an uncounted non-space may begin
    for found in _DOUBLED.finditer(data):
        at = found.start()
        if at > free and not data[at - 1 : at].isspace():
            count, free = count + 1, at + 3
    return count
