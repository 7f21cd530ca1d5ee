"""Parsing and validating the YAML files of a rule pack (see :mod:`diagnostics.pack.rules`):
every field checked, a broken pack named by file, rule and field."""

from __future__ import annotations

import marshal
import re
from collections.abc import Mapping
from functools import lru_cache

from diagnostics.model import Category
from diagnostics.pack.evidence import Provenance, parse_provenance, parse_transient_if
from diagnostics.pack.matching import Regex, RegexError
from diagnostics.pack.pack import (
    KINDS,
    MAX_MESSAGE_LINES,
    PHASES,
    Phase,
    Rule,
    RulePack,
    RulePackError,
)
from diagnostics.pack.templates import check_template

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_REQUIRED = ("id", "category", "permanent", "patterns", "cause", "fix")
_MARKS = ("generic", "of_the_files", "of_the_packages", "engine_only")  # true-or-false
_OPTIONAL = {"when", "defaults", "note", "transient_if", "kind", "message_lines", *_MARKS}
_RULE_KEYS = {*_REQUIRED, *_OPTIONAL}
_WHEN_KEYS = {"traceback_through", "after", "before_ready", "until_progress", "anywhere"}
_PHASE_KEYS = {"phase", "patterns", "note"}
_FILE_KEYS = {"rules", "phases", "provenance"}


def _parse(file_name: str, data: bytes) -> object:
    import yaml  # only for a pack not in the cache: importing it costs ~10 ms

    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        return yaml.load(text, Loader=_unique_key_loader())
    except UnicodeDecodeError as exc:
        raise RulePackError(f"{file_name}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise RulePackError(f"{file_name}: invalid YAML: {detail}") from exc


def _build(
    docs: list[tuple[str, object]],
    root: object,
    *,
    trusted: bool,
    key: str | None = None,
    groups: Mapping[str, dict[str, int]] | None = None,
) -> RulePack:
    """The pack of parsed files; ``trusted``: read back from the cache of validated packs
    (the checks are cheap and run again; only templates, RE2 compiles and the provenance
    paths' shapes are skipped), with ``groups``: each pattern's named groups as RE2 gave
    them when the pack was stored (a pattern not named has none). ``key``: the pack's
    cache key (:attr:`RulePack.key`)."""
    known = _Known(trusted, groups)
    rules: list[Rule] = []
    phases: list[Phase] = []
    seen: dict[str, str] = {}
    provenance: Provenance | None = None
    for file_name, doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise RulePackError(
                f"{file_name}: top level must be a mapping with 'rules' and/or 'phases'"
            )
        unknown = set(doc) - _FILE_KEYS
        if unknown:
            raise RulePackError(f"{file_name}: unknown top-level key(s) {sorted(unknown)}")
        if "provenance" in doc:
            if provenance is not None:
                raise RulePackError(f"{file_name}: provenance: a second provenance section")
            provenance = _provenance(doc["provenance"], file_name, trusted)
        for index, raw in enumerate(_as_list(doc.get("phases", []), file_name, "phases")):
            phases.append(_phase(raw, file_name, index, known))
        for index, raw in enumerate(_as_list(doc.get("rules", []), file_name, "rules")):
            rule = _rule(raw, file_name, index, priority=len(rules), known=known)
            if rule.id in seen:
                first = seen[rule.id]
                raise RulePackError(
                    f"{file_name}: rule {rule.id!r}: field id: duplicate (first defined in {first})"
                )
            seen[rule.id] = file_name
            rules.append(rule)
    if not rules:
        raise RulePackError(f"{root}: the pack defines no rules")
    files = [file_name for file_name, _ in docs]
    return RulePack(rules, phases, files, provenance, key=key, trusted=trusted)


def _provenance(section: object, file_name: str, trusted: bool) -> Provenance:
    if trusted:  # validated when it was stored: parsed on first use (stored as marshal bytes)
        return Provenance.deferred(
            lambda: parse_provenance(
                marshal.loads(section) if isinstance(section, bytes) else section,
                "provenance",
                trusted=True,
            )
        )
    try:
        return parse_provenance(section, "provenance")
    except ValueError as exc:
        raise RulePackError(f"{file_name}: {exc}") from None


def _as_list(value: object, file: str, key: str) -> list:
    if not isinstance(value, list):
        raise RulePackError(f"{file}: {key!r} must be a list")
    return value


@lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    """A SafeLoader (libyaml's when built with it: ~10x faster) that refuses a mapping
    repeating a key (YAML would keep the last)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeyLoader(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set[object] = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=deep)
                    if isinstance(key, list | dict):
                        continue  # unhashable: the base class reports it
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


class _Known:
    """What a pack read back from the cache of validated packs already knows (a plain
    class: a named tuple costs a small log's run ~0.2 ms to create)."""

    __slots__ = ("groups", "trusted")

    def __init__(self, trusted: bool = False, groups: Mapping[str, dict[str, int]] | None = None):
        self.trusted = trusted  # every pattern compiled and every template checked
        self.groups = groups or {}  # a pattern -> its named groups (trusted)


_UNKNOWN = _Known()  # a pack parsed from its files


def _regexes(
    value: object, where: str, field_name: str, known: _Known = _UNKNOWN
) -> tuple[Regex, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RulePackError(
            f"{where}: field {field_name}: must be a non-empty list of regex strings"
        )
    compiled = []
    for text in value:
        try:
            if known.trusted:
                compiled.append(Regex(text, lazy=True, groups=known.groups.get(text) or {}))
            else:
                compiled.append(Regex(text))
        except RegexError as exc:
            raise RulePackError(f"{where}: field {field_name}: {_why_not(text, exc)}") from None
    return tuple(compiled)


def _why_not(text: str, exc: RegexError) -> str:
    """Python's message says best what is wrong with a pattern's syntax; RE2's says the rest."""
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError) as syntax:
        return f"bad regex {text!r}: {syntax}"
    return f"{text!r}: {exc}"


def _phase(raw: object, file: str, index: int, known: _Known = _UNKNOWN) -> Phase:
    where = f"{file}: phase #{index + 1}"
    if not isinstance(raw, dict):
        raise RulePackError(f"{where}: must be a mapping")
    unknown = set(raw) - _PHASE_KEYS
    if unknown:
        raise RulePackError(f"{where}: unknown field(s) {sorted(unknown)}")
    name = raw.get("phase")
    if name not in PHASES:
        raise RulePackError(f"{where}: field phase: {name!r} is not one of {sorted(PHASES)}")
    return Phase(name, _regexes(raw.get("patterns"), where, "patterns", known), file)


def _rule(raw: object, file: str, index: int, priority: int, known: _Known = _UNKNOWN) -> Rule:
    trusted = known.trusted
    if not isinstance(raw, dict):
        raise RulePackError(f"{file}: rule #{index + 1}: must be a mapping")
    rule_id = raw.get("id")
    where = (
        f"{file}: rule {rule_id!r}" if isinstance(rule_id, str) else f"{file}: rule #{index + 1}"
    )
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise RulePackError(f"{where}: unknown field(s) {sorted(unknown)}")
    for key in _REQUIRED:
        if key not in raw:
            raise RulePackError(f"{where}: field {key}: missing")
    if not isinstance(rule_id, str) or not _ID.match(rule_id):
        raise RulePackError(f"{where}: field id: must be kebab-case (a-z, 0-9, '-')")
    try:
        category = Category(raw["category"])
    except ValueError:
        categories = [str(c) for c in Category]
        raise RulePackError(
            f"{where}: field category: {raw['category']!r} is not one of {categories}"
        ) from None
    permanent = raw["permanent"]
    if not isinstance(permanent, bool):
        raise RulePackError(f"{where}: field permanent: must be true or false")
    # Category other has no fixed permanence: it follows the image (a package missing
    # from it fails every restart the same way) or the host (docs/diagnostics.md). An oom
    # rule is transient only where its `when` says the memory was others' (numbers are
    # read by transient_if instead).
    held = category is Category.OOM and not permanent and bool(raw.get("when"))
    if permanent != category.permanent and category is not Category.OTHER and not held:
        raise RulePackError(
            f"{where}: field permanent: category {category} is "
            f"{'permanent' if category.permanent else 'transient'}, so permanent must be "
            f"{str(category.permanent).lower()}"
        )
    patterns = _regexes(raw["patterns"], where, "patterns", known)
    when = raw.get("when") or {}
    if not isinstance(when, dict) or set(when) - _WHEN_KEYS:
        raise RulePackError(f"{where}: field when: allowed keys are {sorted(_WHEN_KEYS)}")
    through = (
        _regexes(when["traceback_through"], where, "when.traceback_through", known)
        if "traceback_through" in when
        else ()
    )
    after = _regexes(when["after"], where, "when.after", known) if "after" in when else ()
    flags = {key: when.get(key, False) for key in ("before_ready", "until_progress", "anywhere")}
    marks = {key: raw.get(key, False) for key in _MARKS}
    for key, flag in [*((f"when.{k}", v) for k, v in flags.items()), *marks.items()]:
        if not isinstance(flag, bool):
            raise RulePackError(f"{where}: field {key}: must be true or false")
    if flags["anywhere"] and not after:
        raise RulePackError(f"{where}: field when.anywhere: needs when.after (its markers)")
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(isinstance(v, str) for v in defaults.values()):
        raise RulePackError(f"{where}: field defaults: must map capture names to strings")
    kind = raw.get("kind", "cause")
    if kind not in KINDS:
        raise RulePackError(f"{where}: field kind: {kind!r} is not one of {list(KINDS)}")
    lines = raw.get("message_lines", Rule._field_defaults["message_lines"])
    if type(lines) is not int or not 1 <= lines <= MAX_MESSAGE_LINES:
        raise RulePackError(f"{where}: field message_lines: must be 1 to {MAX_MESSAGE_LINES}")
    if not trusted:  # templates read the captures, which would compile every pattern
        for key in ("cause", "fix"):
            check_template(raw[key], patterns, defaults, where, key)
    names: set[str] = set()
    if raw.get("transient_if") is not None and not trusted:
        names = {name for rx in patterns for name in rx.groupindex} | set(defaults)
    try:
        transient_if = parse_transient_if(raw.get("transient_if"), names, trusted=trusted)
    except ValueError as exc:
        raise RulePackError(f"{where}: field transient_if: {exc}") from None
    if transient_if is not None and not trusted:
        for key in ("cause", "fix"):
            text = getattr(transient_if, key)
            check_template(text, patterns, defaults, where, f"transient_if.{key}")
    return Rule(
        id=rule_id,
        category=category,
        permanent=permanent,
        patterns=patterns,
        cause=raw["cause"].strip(),
        fix=raw["fix"].strip(),
        priority=priority,
        source=file,
        traceback_through=through,
        after=after,
        before_ready=flags["before_ready"],
        until_progress=flags["until_progress"],
        anywhere=flags["anywhere"],
        defaults=dict(defaults),
        generic=marks["generic"],
        transient_if=transient_if,
        kind=kind,
        message_lines=lines,
        of_the_files=marks["of_the_files"],
        of_the_packages=marks["of_the_packages"],
        engine_only=marks["engine_only"],
    )
