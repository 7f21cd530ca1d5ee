"""The prefilter head of a pattern (shortcut 3 of :mod:`diagnostics.scanning.fastpath`).

Hyperscan reports every end offset of a match, so a pattern ending in ``.*`` reports
once per character after its prefix. The head drops such a trailing any-length or
optional part: a line the pattern matches holds a match of the head, and the head
reports a few events per line.
"""

from __future__ import annotations

import re

# A quantified atom that can run over any text: what makes a match report per character.
_ANY_RUN = r"(?:\.|\\S|\\W|\\D|\[\^[^\]]*\])(?:[*+]|\{\d+,\d*\})"
_QUANTIFIER = r"[*+?]|\{\d*(?:,\d*)?\}"
_OPTIONAL = r"\{0?,\d*\}\??$"


def _elements(pattern: str) -> list[str] | None:
    """``pattern`` split into its top-level atoms (each with its quantifier), or None
    when it has a top-level alternation or a construct this splitter does not know."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        start, char = i, pattern[i]
        if char == "\\":
            if i + 1 >= n:
                return None
            if pattern[i + 1] in "xuUNpP" or pattern[i + 1].isdigit():
                return None  # multi-character escapes: not worth the risk
            i += 2
        elif char == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "[" and pattern.startswith("[:", i):
                    end = pattern.find(":]", i + 2)
                    if end < 0:
                        return None
                    i = end + 2
                    continue
                i += 2 if pattern[i] == "\\" else 1
            if i >= n:
                return None
            i += 1
        elif char == "(":
            depth, in_class = 0, False
            while i < n:
                c = pattern[i]
                if c == "\\":
                    i += 2
                    continue
                if in_class:
                    in_class = c != "]"
                elif c == "[":
                    in_class = True
                    if pattern.startswith("[^]", i) or pattern.startswith("[]", i):
                        i += 2 if pattern[i + 1] == "]" else 3
                        continue
                elif c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                i += 1
            else:
                return None
        elif char == "|":
            return None
        elif char in "*+?{)":
            return None  # a quantifier without an atom: leave the pattern alone
        else:
            i += 1
        quantifier = re.compile(_QUANTIFIER).match(pattern, i)
        if quantifier and not (pattern[i] == "{" and quantifier.group() == "{}"):
            i = quantifier.end()
            if i < n and pattern[i] in "?+":
                i += 1
        out.append(pattern[start:i])
    return out


def prefilter_head(pattern: str) -> str:
    """``pattern`` (a prefilter form: no anchors) without a trailing part that can run
    over any text or is optional. A line the pattern matches holds a match of the
    head, so the head prefilters as well; it reports a few match ends per line, not
    one per character."""
    elements = _elements(pattern)
    if elements is None or (elements and elements[0].startswith("(?") and len(elements) == 1):
        return pattern
    elements = _flattened(elements)
    keep = len(elements)
    while keep > 1:
        last = elements[keep - 1]
        optional = last.endswith(("?", "*", "*?", "?+", "*+")) or bool(re.search(_OPTIONAL, last))
        if not (optional or re.search(_ANY_RUN, last)):
            break
        keep -= 1
    head = "".join(elements[:keep])
    if keep == len(elements) or not _safe_head(head):
        return pattern
    return head


def _flattened(elements: list[str]) -> list[str]:
    """A named group that is neither quantified nor alternated is its elements: a
    catalogued message's fixed words inside ``(?P<detail>...)`` stay in the head, where
    the head of the group as one element would end before them (every exception line
    then hit each of hundreds of such patterns)."""
    out: list[str] = []
    for element in elements:
        group = re.match(r"\(\?P<\w+>(.*)\)$", element, re.S)
        inner = _elements(group.group(1)) if group else None
        if inner:
            out += _flattened(inner)
        else:
            out.append(element)
    return out


def _safe_head(head: str) -> bool:
    """The head compiles and cannot match the empty string (that would hit every line)."""
    try:
        compiled = re.compile(head)
    except (re.error, RecursionError, OverflowError):
        return False
    return compiled.fullmatch("") is None and len(head) >= 3
