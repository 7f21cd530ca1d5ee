"""Load and validate the rule pack (``rules/*.yaml``).

A pack is a folder of YAML files read in file-name order; file order, then order
inside a file, is priority: when several rules match a log, the earliest rule wins.
Each file may hold ``rules:`` (failure rules) and ``phases:`` (progress markers).
Everything is checked on load; a broken pack raises one :class:`RulePackError`
naming the file, the rule and the field. Every pattern must compile in RE2 (which
runs every match and capture in linear time) and in Hyperscan (the multi-pattern
prefilter); see :mod:`diagnostics.matching`. Message templates may only name the
rule's captures (``{name}``: no format spec or conversion, captures are text), and a
mapping that repeats a key (``patterns:`` twice) is an error, not a silent override.

A pack that passed validation is stored in the disk cache of :mod:`diagnostics.dbcache`
(the parsed YAML, as ``marshal`` data), keyed by a hash of the pack files' names and
bytes, the source of the modules that judge a pack (this one, evidence, model,
matching) and the RE2 and Hyperscan builds. A later load of the same pack reads it
back: no YAML parse, no checks again, and RE2 compiles each pattern on its first use.
A pack not found there is read and validated in full, as always.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import hyperscan
import re2

from diagnostics import dbcache
from diagnostics.evidence import TransientIf, parse_transient_if
from diagnostics.matching import Regex, RegexError, hyperscan_database, prefilter_form
from diagnostics.model import Category, State

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_RULE_KEYS = {
    "id",
    "category",
    "permanent",
    "patterns",
    "when",
    "cause",
    "fix",
    "defaults",
    "generic",
    "note",
    "transient_if",
}
_REQUIRED = ("id", "category", "permanent", "patterns", "cause", "fix")
_WHEN_KEYS = {"traceback_through", "after", "before_ready"}
_PHASE_KEYS = {"phase", "patterns", "note"}
_FILE_KEYS = {"rules", "phases"}
# Progress markers: "stopping" marks a requested shutdown, after which generic
# wrapper errors (EngineDeadError...) are expected and not a failure; "starting" marks
# the start of a start (a new one when it follows a ready marker).
PHASES = {
    "starting": State.STARTING,
    "downloading": State.DOWNLOADING,
    "loading": State.LOADING,
    "ready": State.READY,
    "stopping": None,
}
TRACEBACK_START = r"Traceback \(most recent call last\)"
# Lines only a Python traceback prints: a frame (standard or IPython), the code line of
# a raise, the position markers of Python 3.11+. They show a traceback whose header
# was cut off (an elided paste).
TRACEBACK_BODY = (
    r'^\s*File "[^"]+", line \d+, in ',
    r"^\s*File [~/.\w][^\s:]*\.py:\d+, in ",
    r"^\s*Cell In\[\d+\], line \d+",
    r"^-+> +\d+ ",
    r"^\s+raise [A-Za-z_][\w.]*(?:\(|$)",
    r"^\s+~*\^+[~^]*$",
)


class RulePackError(Exception):
    """Raised when the rule pack cannot be read or fails validation."""


@dataclass(frozen=True)
class Rule:
    id: str
    category: Category
    permanent: bool
    patterns: tuple[Regex, ...]
    cause: str
    fix: str
    priority: int
    source: str
    traceback_through: tuple[Regex, ...] = ()
    after: tuple[Regex, ...] = ()
    before_ready: bool = False  # after a ready marker, counts only once vLLM exited
    defaults: Mapping[str, str] = field(default_factory=dict)
    generic: bool = False
    transient_if: TransientIf | None = None


@dataclass(frozen=True)
class Phase:
    phase: str
    patterns: tuple[Regex, ...]
    source: str


@dataclass(frozen=True)
class Pattern:
    """One entry of the Hyperscan database and what it stands for."""

    kind: str  # "rule" | "phase" | "traceback" | "traceback_body" | "frame" | "after"
    owner: int  # index into rules / phases; unused for "traceback"
    regex: Regex


class RulePack:
    """Validated rules and phase markers, plus the compiled prefilter."""

    def __init__(self, rules: list[Rule], phases: list[Phase], files: list[str]):
        self.rules = rules
        self.phases = phases
        self.files = files
        self.patterns: list[Pattern] = []
        for p in phases:
            self.patterns += [Pattern("phase", phases.index(p), rx) for rx in p.patterns]
        for rule in rules:
            self.patterns += [Pattern("rule", rule.priority, rx) for rx in rule.patterns]
            self.patterns += [Pattern("frame", rule.priority, rx) for rx in rule.traceback_through]
            self.patterns += [Pattern("after", rule.priority, rx) for rx in rule.after]
        self.patterns.append(Pattern("traceback", -1, Regex(TRACEBACK_START)))
        # Owner past every rule: only needed while no failure matched.
        self.patterns += [Pattern("traceback_body", len(rules), Regex(rx)) for rx in TRACEBACK_BODY]
        try:
            # Which patterns hit a line, once each (the classifier). Blocks are scanned
            # with databases derived from the same patterns (diagnostics.fastpath).
            self.line_database = _compile(self.patterns, single_match=True)
        except RulePackError:
            self._name_unsupported()
            raise

    def _name_unsupported(self) -> None:
        """Find the pattern Hyperscan rejects and say where it is (slow; only on error)."""
        fields = {
            "rule": "patterns",
            "phase": "patterns",
            "frame": "when.traceback_through",
            "after": "when.after",
        }
        for pattern in self.patterns:
            try:
                _compile([pattern])
            except RulePackError as exc:
                if pattern.kind == "phase":
                    phase = self.phases[pattern.owner]
                    where = f"{phase.source}: phase {phase.phase!r}"
                else:
                    rule = self.rules[pattern.owner]
                    where = f"{rule.source}: rule {rule.id!r}"
                raise RulePackError(
                    f"{where}: field {fields[pattern.kind]}: {pattern.regex.pattern!r}: {exc}"
                ) from None

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


def default_rules_dir() -> Traversable:
    """The pack shipped with the project, read as package data (``diagnostics.rulepack``).

    A Traversable, not a path: installed from a wheel, an sdist or in editable mode the
    package may be a namespace package (a ``MultiplexedPath``), whose ``str()`` is no
    file name. A checkout that is not installed at all reads ``rules/`` beside the code.
    """
    try:
        spec = importlib.util.find_spec("diagnostics.rulepack")
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return Path(__file__).resolve().parent.parent / "rules"
    # One plain folder (the usual case): a Path, without importing importlib.resources
    # (~5 ms of a small log's run).
    folders = list(spec.submodule_search_locations or ())
    if len(folders) == 1 and os.path.isdir(folders[0]):
        return Path(folders[0])
    from importlib import resources

    return resources.files("diagnostics.rulepack")


def load_pack(path: Path | str | None = None) -> RulePack:
    """Read every ``*.yaml`` in ``path`` (a folder) or the one file ``path`` names."""
    root = Path(path) if path is not None else default_rules_dir()
    if root.is_dir():
        yamls = [f for f in root.iterdir() if f.name.endswith(".yaml") and f.is_file()]
        files = sorted(yamls, key=lambda f: f.name)
    elif root.is_file():
        files = [root]
    else:
        raise RulePackError(f"{root}: no such rule file or folder")
    if not files:
        raise RulePackError(f"{root}: no *.yaml rule files")
    sources = [(f.name, _read(f)) for f in files]
    folder = dbcache.cache_dir()
    name = _pack_key(sources) if folder is not None else None
    if folder is not None and name is not None:
        docs = _cached_docs(folder / f"{name}.pack")
        if docs is not None:
            return _build(docs, root, trusted=True)
    docs = [(file_name, _parse(file_name, data)) for file_name, data in sources]
    pack = _build(docs, root, trusted=False)
    if folder is not None and name is not None:
        try:
            payload = marshal.dumps([_PACK_FORMAT, docs])
        except ValueError:  # a YAML value marshal cannot hold (a date in a note): not cached
            return pack
        dbcache.write_entry(folder, f"{name}.pack", payload)
    return pack


def _read(file: Traversable) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise RulePackError(f"{file.name}: cannot read: {exc}") from exc


_PACK_FORMAT = 1  # bump when what is stored changes meaning
# The modules whose code decides whether a pack is valid and what it means.
_JUDGES = ("rules.py", "evidence.py", "model.py", "matching.py")


def _pack_key(sources: list[tuple[str, bytes]]) -> str | None:
    """A hash of the pack and of everything its validation depends on; None if unknown."""
    digest = hashlib.sha256(b"rulepack%d\0" % _PACK_FORMAT)
    here = Path(__file__).resolve().parent
    try:
        judges = [(name, (here / name).read_bytes()) for name in _JUDGES]
        re2_file = os.stat(re2.__file__ or "")
    except (OSError, TypeError):
        return None
    extra = (
        str(getattr(hyperscan, "__version__", "")),
        str(getattr(re2, "__version__", "")),
        f"{re2.__file__}:{re2_file.st_size}:{re2_file.st_mtime_ns}",
    )
    for part in extra:
        digest.update(part.encode() + b"\0")
    for file_name, data in (*judges, *sources):
        digest.update(b"%d:%s:%d:" % (len(file_name), file_name.encode(), len(data)) + data)
    return digest.hexdigest()


def _cached_docs(path: Path) -> list[tuple[str, object]] | None:
    payload = dbcache.read_entry(path)
    if payload is None:
        return None
    try:
        stored = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(stored, list) and len(stored) == 2 and stored[0] == _PACK_FORMAT):
        return None
    docs = stored[1]
    if not isinstance(docs, list) or not all(
        isinstance(d, tuple) and len(d) == 2 and isinstance(d[0], str) for d in docs
    ):
        return None
    return docs


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


def _build(docs: list[tuple[str, object]], root: object, *, trusted: bool) -> RulePack:
    """The pack of parsed files; ``trusted``: read back from the cache of validated packs
    (the checks are cheap and run again; only templates and RE2 compiles are skipped)."""
    rules: list[Rule] = []
    phases: list[Phase] = []
    seen: dict[str, str] = {}
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
        for index, raw in enumerate(_as_list(doc.get("phases", []), file_name, "phases")):
            phases.append(_phase(raw, file_name, index, trusted))
        for index, raw in enumerate(_as_list(doc.get("rules", []), file_name, "rules")):
            rule = _rule(raw, file_name, index, priority=len(rules), trusted=trusted)
            if rule.id in seen:
                first = seen[rule.id]
                raise RulePackError(
                    f"{file_name}: rule {rule.id!r}: field id: duplicate (first defined in {first})"
                )
            seen[rule.id] = file_name
            rules.append(rule)
    if not rules:
        raise RulePackError(f"{root}: the pack defines no rules")
    return RulePack(rules, phases, [file_name for file_name, _ in docs])


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


def _regexes(
    value: object, where: str, field_name: str, trusted: bool = False
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
            compiled.append(Regex(text, lazy=trusted))
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


def _phase(raw: object, file: str, index: int, trusted: bool = False) -> Phase:
    where = f"{file}: phase #{index + 1}"
    if not isinstance(raw, dict):
        raise RulePackError(f"{where}: must be a mapping")
    unknown = set(raw) - _PHASE_KEYS
    if unknown:
        raise RulePackError(f"{where}: unknown field(s) {sorted(unknown)}")
    name = raw.get("phase")
    if name not in PHASES:
        raise RulePackError(f"{where}: field phase: {name!r} is not one of {sorted(PHASES)}")
    return Phase(name, _regexes(raw.get("patterns"), where, "patterns", trusted), file)


def _rule(raw: object, file: str, index: int, priority: int, trusted: bool = False) -> Rule:
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
        known = [str(c) for c in Category]
        raise RulePackError(
            f"{where}: field category: {raw['category']!r} is not one of {known}"
        ) from None
    permanent = raw["permanent"]
    if not isinstance(permanent, bool):
        raise RulePackError(f"{where}: field permanent: must be true or false")
    if permanent != category.permanent:
        raise RulePackError(
            f"{where}: field permanent: category {category} is "
            f"{'permanent' if category.permanent else 'transient'}, so permanent must be "
            f"{str(category.permanent).lower()}"
        )
    patterns = _regexes(raw["patterns"], where, "patterns", trusted)
    when = raw.get("when") or {}
    if not isinstance(when, dict) or set(when) - _WHEN_KEYS:
        raise RulePackError(f"{where}: field when: allowed keys are {sorted(_WHEN_KEYS)}")
    through = (
        _regexes(when["traceback_through"], where, "when.traceback_through", trusted)
        if "traceback_through" in when
        else ()
    )
    after = _regexes(when["after"], where, "when.after", trusted) if "after" in when else ()
    before_ready = when.get("before_ready", False)
    if not isinstance(before_ready, bool):
        raise RulePackError(f"{where}: field when.before_ready: must be true or false")
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(isinstance(v, str) for v in defaults.values()):
        raise RulePackError(f"{where}: field defaults: must map capture names to strings")
    generic = raw.get("generic", False)
    if not isinstance(generic, bool):
        raise RulePackError(f"{where}: field generic: must be true or false")
    if not trusted:  # templates read the captures, which would compile every pattern
        for key in ("cause", "fix"):
            _check_template(raw[key], patterns, defaults, where, key)
    names: set[str] = set()
    if raw.get("transient_if") is not None:
        names = {name for rx in patterns for name in rx.groupindex} | set(defaults)
    try:
        transient_if = parse_transient_if(raw.get("transient_if"), names)
    except ValueError as exc:
        raise RulePackError(f"{where}: field transient_if: {exc}") from None
    if transient_if is not None and not trusted:
        for key in ("cause", "fix"):
            text = getattr(transient_if, key)
            _check_template(text, patterns, defaults, where, f"transient_if.{key}")
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
        before_ready=before_ready,
        defaults=dict(defaults),
        generic=generic,
        transient_if=transient_if,
    )


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def _check_template(template: object, patterns, defaults, where: str, key: str) -> None:
    if not isinstance(template, str) or not template.strip():
        raise RulePackError(f"{where}: field {key}: must be a non-empty string")
    try:
        parts = list(string.Formatter().parse(template))
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


def _compile(patterns: list[Pattern], single_match: bool = False) -> hyperscan.Database:
    try:
        return hyperscan_database([p.regex.pattern for p in patterns], single_match)
    except hyperscan.error as exc:
        raise RulePackError(f"pattern not supported by Hyperscan: {exc}") from None


_unanchored = prefilter_form  # the prefilter form (bench/ reads it under this name)
