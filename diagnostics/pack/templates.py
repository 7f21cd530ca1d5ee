"""The message templates of a rule pack (a rule's ``cause`` and ``fix``): which captures
they name, checked when a pack is validated."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from diagnostics.pack.pack import RulePackError

# string.Formatter().parse itself, without importing string (~0.5 ms of a small log's
# run: its Template class compiles a pattern at import). (literal, name, spec, conversion)
_parse: Callable[[str], Iterable[tuple[str, str | None, str | None, str | None]]] = (
    importlib.import_module("_string").formatter_parser
)


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in _parse(template) if name is not None}


def check_template(template: object, patterns, defaults, where: str, key: str) -> None:
    """A rule's ``cause``/``fix`` (``key``) names only captures its ``patterns`` or its
    ``defaults`` provide, as ``{name}``; else RulePackError naming ``where``."""
    if not isinstance(template, str) or not template.strip():
        raise RulePackError(f"{where}: field {key}: must be a non-empty string")
    try:
        parts = list(_parse(template))
    except ValueError as exc:
        raise RulePackError(f"{where}: field {key}: bad template: {exc}") from exc
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
        if missing and name not in defaults:
            raise RulePackError(
                f"{where}: field {key}: '{{{name}}}' has no named capture in pattern(s) "
                f"{missing} and no default"
            )
