"""The rule pack as the classifier reads it: rules, phase markers and the Hyperscan
database of all their patterns (loaded by :mod:`diagnostics.pack.rules`)."""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import hyperscan

from diagnostics.model import Category, State
from diagnostics.pack.evidence import Provenance, TransientIf
from diagnostics.pack.matching import Regex, hyperscan_database

# Progress markers: "stopping" marks a requested shutdown, after which generic
# wrapper errors (EngineDeadError...) are expected and not a failure; "starting" marks
# the start of a start (a new one when it follows a ready marker).
PHASES = {
    "starting": State.STARTING,
    "downloading": State.DOWNLOADING,
    "loading": State.LOADING,
    "ready": State.READY,
    "stopping": None,
    # a server at work (its request stats, its answers on vLLM's routes): read only at
    # the end of a log with no ready marker left in it (diagnostics.classify.serving),
    # never by the line scan (hours of request logs stay lines no pattern matches)
    "serving": State.READY,
    # a shell prompt running a command that prints a log (kubectl logs, docker logs,
    # journalctl, cat of a .log file): what follows it is another recording, read only
    # by the attempts pass (diagnostics.attempts.last), never by the line scan
    "recording": None,
}
_NOT_SCANNED = frozenset({"serving", "recording"})
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
    r"^\s+assert \S",  # the code line of a bare assertion (what it asserted)
    r"^\s+~*\^[~^]*$",  # (not \^+: the scan's head would end at every caret)
)
# The lines that chain one traceback to the one before it: the exception above is the
# origin of the one below (see diagnostics.classify.findings).
CHAIN_MARKERS = (
    r"^\s*The above exception was the direct cause of the following exception",
    r"^\s*During handling of the above exception, another exception occurred",
)
# Lines whose message normalize() reshapes into an exception line (pydantic v1's
# "msg (type=value_error)", vLLM 0.5's "Exception in worker X while processing method
# m: msg", an exception logged as its repr) and IPython's header naming the exception's
# class: always read.
RESHAPED = (
    r"\(type=value_error(?:\.\w+)?\)\s*$",
    r"Exception in worker \S+ while processing method \w+: ",
    r"[A-Z]\w*(?:Error|Exception)\('.*'\)\s*$",
    r'[A-Z]\w*(?:Error|Exception)\(".*"\)\s*$',
)
HEADER_CLASS = r"^\s*(?:[\w.]+\.)?[A-Z]\w*\s{2,}Traceback \(most recent call last\)"
# A line logged at level ERROR or CRITICAL, in the formats vLLM's output takes: vLLM's
# logger (under any process prefix), uvicorn's, Python logging's defaults and the common
# configured ones. Read on the raw line (normalising strips the level); a log that ends
# after one, before ready and with nothing else to read, is a failed start whose cause
# was not recognised (see diagnostics.classify.unmatched.ends_after_error).
ERROR_LEVEL = (
    r"(?:^|[\s|:)\]])(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d",
    r"(?:^|[\s|:)\]])ERROR:\s{2,}\S",
    r"(?:^|\s)(?:ERROR|CRITICAL):[\w.]+:",
    r" - (?:ERROR|CRITICAL) - ",
    r"\[(?:ERROR|CRITICAL)\]",
    r" \| (?:ERROR|CRITICAL) +\| ",
    # glog's E level, as Ray's and gRPC's native code print it
    r"^E\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] ",
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} E \d+ \d+\] ",
    # vLLM's report that its processes wait on each other (a hang, or slow work): a
    # warning, never a verdict while vLLM runs, but a log that ends on it stopped there
    r"No available shared memory broadcast block found in \d+ seconds",
)
# What a rule's finding says about a failed start, strongest first: a specific cause;
# generic structure (an exception family, judged by its frames or wording); a
# consequence or wrapper printed after the cause (Killed, engine core failed, a worker
# died); a shape only (the log ends in a traceback). See docs/diagnostics.md.
KINDS = ("cause", "structure", "consequence", "shape")


class RulePackError(Exception):
    """Raised when the rule pack cannot be read or fails validation."""


# The pack's values are named tuples, not dataclasses: ~15 dataclasses cost a small log's
# run ~10 ms of class creation (each generates and compiles its methods at import).
MAX_MESSAGE_LINES = 10  # the most lines one message is read over (a rule's message_lines)


class Rule(NamedTuple):
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
    until_progress: bool = False  # forgotten when the start goes on to a later phase
    anywhere: bool = False  # its ``after`` markers (settings) count wherever a paste shows them
    defaults: Mapping[str, str] = MappingProxyType({})
    generic: bool = False
    transient_if: TransientIf | None = None
    kind: str = "cause"
    rank: int = 0  # the selection order of its findings (RulePack sets it; lower wins)
    message_lines: int = 3  # lines a paste's reflow may spread its message over
    # what the model's files can cause (missing, cut or half-converted weights): a step
    # above vLLM's start that was to fetch, convert or copy them and failed is its cause
    of_the_files: bool = False
    # what the image's packages lack (a module, a model type its transformers does not
    # know): a step above vLLM's start that was to install them and failed is its cause
    of_the_packages: bool = False
    # only an engine that runs prints it (a kernel's fault, a communicator's): above the
    # first start a paste shows, an earlier attempt's whose start was cut, not a step's
    engine_only: bool = False


class Phase(NamedTuple):
    phase: str
    patterns: tuple[Regex, ...]
    source: str


class Pattern(NamedTuple):
    """One entry of the Hyperscan database and what it stands for."""

    # "rule" | "phase" | "frame" | "after" | "traceback" | "traceback_body" | "chain" |
    # "reshaped" | "header_class" | "error_level"
    kind: str
    owner: int  # index into rules / phases; unused for "traceback"
    regex: Regex


class RulePack:
    """Validated rules and phase markers, plus the compiled prefilter. ``key``: the hash
    of the pack's files and of the code that reads them (:mod:`diagnostics.pack.rules`),
    when it was computed: the same key, the same patterns, so the databases built from
    them are keyed on it instead of on every pattern. ``trusted``: the pack was read back
    from the cache of validated packs (the built-in patterns compile on first use too)."""

    def __init__(
        self,
        rules: list[Rule],
        phases: list[Phase],
        files: list[str],
        provenance: Provenance | None = None,
        *,
        key: str | None = None,
        trusted: bool = False,
    ):
        self.key = key
        self.rules = rules = _ranked(rules)
        self._by_id: dict[str, Rule] | None = None
        self.provenance = provenance or Provenance()
        self.phases = phases
        self.files = files
        self.patterns: list[Pattern] = []
        for index, p in enumerate(phases):
            if p.phase not in _NOT_SCANNED:
                self.patterns += [Pattern("phase", index, rx) for rx in p.patterns]
        self.serving = tuple(rx for p in phases if p.phase == "serving" for rx in p.patterns)
        self.recording = tuple(rx for p in phases if p.phase == "recording" for rx in p.patterns)
        # the markers of a start under way: their indexes in the line database (a line
        # they may hit is found by one scan, then confirmed by its regex)
        self.under_way = frozenset(
            at
            for at, pattern in enumerate(self.patterns)
            if pattern.kind == "phase"
            and phases[pattern.owner].phase in ("starting", "downloading", "loading")
        )
        for rule in rules:
            self.patterns += [Pattern("rule", rule.priority, rx) for rx in rule.patterns]
            self.patterns += [Pattern("frame", rule.priority, rx) for rx in rule.traceback_through]
            self.patterns += [Pattern("after", rule.priority, rx) for rx in rule.after]
        # The built-in patterns have no named groups.
        builtin = (lambda rx: Regex(rx, lazy=True, groups={})) if trusted else Regex
        self.patterns.append(Pattern("traceback", -1, builtin(TRACEBACK_START)))
        # Owner past every rule: only needed while no failure matched.
        end = len(rules)
        self.patterns += [Pattern("traceback_body", end, builtin(rx)) for rx in TRACEBACK_BODY]
        self.patterns += [Pattern("chain", end, builtin(rx)) for rx in CHAIN_MARKERS]
        self.patterns += [Pattern("reshaped", end, builtin(rx)) for rx in RESHAPED]
        self.patterns.append(Pattern("header_class", end, builtin(HEADER_CLASS)))
        self.error_ids = frozenset(range(len(self.patterns), len(self.patterns) + len(ERROR_LEVEL)))
        self.patterns += [Pattern("error_level", end, builtin(rx)) for rx in ERROR_LEVEL]
        try:
            # Which patterns hit a line, once each (the classifier). Blocks are scanned
            # with databases derived from the same patterns (diagnostics.scanning.fastpath).
            self.line_database = _compile(self.patterns, single_match=True, pack_key=key)
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

    def verdicts_rule(self, rule_id: str | None) -> Rule | None:
        """The rule a verdict names, or None: a verdict of the log's shape or one derived
        by the catalogue or provenance names no rule of the pack."""
        try:
            return self.by_id(rule_id or "")
        except KeyError:
            return None

    def by_id(self, rule_id: str) -> Rule:
        """The rule ``rule_id`` names; KeyError if none (a shape's or a derived verdict)."""
        if self._by_id is None:
            self._by_id = {}
            for rule in reversed(self.rules):  # the first of one id, as a walk finds it
                self._by_id[rule.id] = rule
        return self._by_id[rule_id]


def claim_rank(rule: Rule) -> tuple[int, int]:
    """Which of the rules that accept one line reads it (the lower first): a rule whose
    condition held (the frames it names, a line it needs before) before a rule without
    one, then the pack's order. Its condition is evidence the other lacks: the API
    server's bind (``create_server_socket`` among the frames) names what the gaierror
    a hub's lookup also raises was for."""
    conditioned = rule.kind == "cause" and bool(rule.traceback_through or rule.after)
    return (0 if conditioned else 1, rule.priority)


def tier(rule: Rule) -> int:
    """The selection tier of a rule's findings (lower wins): among specific causes,
    memory first (it keeps precedence over what it causes), then device faults (a GPU
    fault printed in the failed start keeps it transient), then every other cause; then
    generic structure, consequences and shapes."""
    if rule.kind == "cause":
        if rule.category in (Category.OOM, Category.KV_CACHE):
            return 0
        return 1 if rule.category is Category.CUDA_FAULT else 2
    return 2 + KINDS.index(rule.kind)


_BY_POSITION = (2, 2 + KINDS.index("consequence"))  # the tiers ranked by position


def _ranked(rules: list[Rule]) -> list[Rule]:
    """The rules with their rank: by tier; inside the memory, fault and structure tiers
    by pack order; every other specific cause shares one rank, and so does every
    consequence (the earliest finding wins, see diagnostics.classify.findings: a process
    printed dying comes before NCCL's watchdog timing out waiting for it)."""
    keys = [(tier(r), 0 if tier(r) in _BY_POSITION else r.priority) for r in rules]
    order = {key: n for n, key in enumerate(sorted(set(keys)))}
    return [r._replace(rank=order[key]) for r, key in zip(rules, keys, strict=True)]


def _compile(
    patterns: list[Pattern], single_match: bool = False, pack_key: str | None = None
) -> hyperscan.Database:
    try:
        return hyperscan_database([p.regex.pattern for p in patterns], single_match, pack_key)
    except hyperscan.error as exc:
        raise RulePackError(f"pattern not supported by Hyperscan: {exc}") from None
