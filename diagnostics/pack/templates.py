"""The message templates of a rule pack (a rule's ``cause`` and ``fix``): which captures
they name, checked when a pack is validated."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Container, Iterable

from diagnostics.pack.pack import RulePackError

# string.Formatter().parse itself, without importing string (~0.5 ms of a small log's
# run: its Template class compiles a pattern at import). (literal, name, spec, conversion)
_parse: Callable[[str], Iterable[tuple[str, str | None, str | None, str | None]]] = (
    importlib.import_module("_string").formatter_parser
)


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in _parse(template) if name is not None}


# A part of a template in double brackets is said only when every capture it names was
# found in the log: "it tried to allocate {size}[[ on a GPU with {total} in total]]".
_OPTIONAL_OPEN, _OPTIONAL_CLOSE = "[[", "]]"


def _optional_parts(template: str) -> list[tuple[int, int]]:
    """(start, end) of each ``[[...]]`` part of ``template``, brackets included."""
    parts, start = [], template.find(_OPTIONAL_OPEN)
    while start >= 0:
        end = template.find(_OPTIONAL_CLOSE, start + 2)
        if end < 0:
            break
        parts.append((start, end + 2))
        start = template.find(_OPTIONAL_OPEN, end + 2)
    return parts


def resolve_optional(template: str, found: Container[str]) -> str:
    """``template`` with each ``[[...]]`` part kept (without its brackets) when every
    capture it names is in ``found``, else left out."""
    if _OPTIONAL_OPEN not in template:
        return template
    out, at = [], 0
    for start, end in _optional_parts(template):
        inner = template[start + 2 : end - 2]
        said = all(name in found for name in template_fields(inner))
        out += [template[at:start], inner if said else ""]
        at = end
    return "".join(out) + template[at:]


def check_template(template: object, patterns, defaults, where: str, key: str) -> None:
    """A rule's ``cause``/``fix`` (``key``) names only captures its ``patterns`` or its
    ``defaults`` provide, as ``{name}``; else RulePackError naming ``where``."""
    if not isinstance(template, str) or not template.strip():
        raise RulePackError(f"{where}: field {key}: must be a non-empty string")
    try:
        parts = list(_parse(template))
    except ValueError as exc:
        raise RulePackError(f"{where}: field {key}: bad template: {exc}") from exc
    # Captures named only inside [[...]] parts need no default: a part is left out when
    # its captures were not found. ``required``: the names the template says always.
    try:
        required = template_fields(resolve_optional(template, ()))
    except ValueError as exc:
        raise RulePackError(f"{where}: field {key}: bad [[...]] part: {exc}") from exc
    names = set()
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name.isidentifier():
            raise RulePackError(f"{where}: field {key}: '{{{name}}}' is not a capture name")
        if spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + f":{spec}" * bool(spec)
            raise RulePackError(
                f"{where}: field {key}: '{shown}}}': format specs and conversions are not "
                f"allowed (captures are text); write '{{{name}}}'"
            )
        names.add(name)
    for name in names:
        missing = [i + 1 for i, rx in enumerate(patterns) if name not in rx.groupindex]
        if name not in required and len(missing) < len(patterns):
            continue  # captured by some pattern; left out with its part when not found
        if missing and name not in defaults:
            raise RulePackError(
                f"{where}: field {key}: '{{{name}}}' has no named capture in pattern(s) "
                f"{missing} and no default"
            )
