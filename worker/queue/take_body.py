"""Reading a job-take body whole (``read_body``): bytes → the elements of the batch.

runpod 1.12's ``rp_job.get_job`` parses the job-take body with ``response.json()``; an
input nested about 1,000 levels deep raises ``RecursionError``, which its fetch loop
logs as "Failed to get job": every job of that batch is lost, taken but never answered
(the platform only sees them time out). Here, when the parser recurses too deep, every
container nested deeper than ``MAX_DEPTH`` is replaced (by one linear scan, no
recursion: ``flatten``) with a placeholder, the batch is parsed again, and the indexes
of the jobs that lost part of their input are returned with the elements (the check,
``worker.queue.job_check``, answers them as a bad input). A body that is not valid JSON
(or not UTF-8) is still dropped, as the SDK drops it (no job id can be trusted from it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sized

import structlog

log = structlog.get_logger("worker.job_fetch")

MAX_DEPTH = 500
_PLACEHOLDER = json.dumps(f"<nested deeper than {MAX_DEPTH} levels>")
_TOKENS = re.compile(r'[\[\]{}"\\]')


def read_body(body: bytes) -> tuple[list[object], set[int]] | None:
    """The elements of a job-take body (one object, or a list for the batch API), and the
    indexes of those whose input was nested too deep to read whole; None if the body is
    not JSON, not UTF-8, or neither an object nor a list."""
    too_deep: set[int] = set()
    try:
        text = body.decode("utf-8")
        try:
            elements = json.loads(text)
        except RecursionError:
            flat, too_deep = flatten(text, MAX_DEPTH)
            elements = json.loads(flat)
    except (ValueError, RecursionError) as error:  # ValueError includes UnicodeDecodeError
        log.warning("job.take_unreadable", error=str(error)[:200])
        return None
    if isinstance(elements, dict):
        return [elements], too_deep
    if not isinstance(elements, list):
        log.warning("job.take_not_a_batch", body=kind(elements), dropped=True)
        return None
    return elements, too_deep


def json_name(value: object) -> str:
    """The JSON name of a value's type ("null", "a boolean", "a number", "a string", "an
    array", "an object"; another type's Python name), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


_UNITS = {"a string": "character", "an array": "item", "an object": "field"}


def kind(value: object) -> str:
    """What a JSON value is, in a few words (never the value itself): its ``json_name``,
    with the length of a string, array or object ("an array of 2 items")."""
    name = json_name(value)
    unit = _UNITS.get(name)
    if unit is None or not isinstance(value, Sized):
        return name
    count = len(value)
    return f"{name} of {count} {unit}{'' if count == 1 else 's'}"


def flatten(text: str, max_depth: int) -> tuple[str, set[int]]:
    """``text`` (JSON) with every container deeper than ``max_depth`` replaced by a
    placeholder string, and the indexes of the jobs that held one (the top-level object
    is job 0; in a top-level list, its items are jobs 0, 1, ...). Linear, no recursion."""
    out: list[str] = []
    damaged: set[int] = set()
    depth = 0
    in_string = False
    skip_to = 0  # after a backslash inside a string, the escaped character
    copied = 0  # text[:copied] is in out (or replaced)
    cut_from = -1
    top_is_list = False
    job = -1
    for match in _TOKENS.finditer(text):
        at = match.start()
        if at < skip_to:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip_to = at + 2
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth == 1:
                top_is_list = char == "["
                job = -1 if top_is_list else 0
            elif depth == 2 and top_is_list:
                job += 1
            if depth == max_depth + 1:
                cut_from = at
        elif char in "]}":
            if depth == max_depth + 1 and cut_from >= 0:
                out.append(text[copied:cut_from])
                out.append(_PLACEHOLDER)
                copied = at + 1
                cut_from = -1
                damaged.add(max(job, 0))
            depth -= 1
    out.append(text[copied:])
    return "".join(out), damaged
