"""Benchmark ``diagnose`` on a large log against GNU grep with the same patterns.

Builds a log of at least ``--size-mb`` MiB (default 500) from the real vLLM logs in
``fixtures/`` (corpus and vllm-0.32, ``#|`` provenance lines stripped), repeated, and
ending with a real start followed by a real failed start (``startup-ok.log`` then
``kv-cache-too-small.log``), so there is a failure to find at the very end. Then it
times, on that file:

  diagnose  ``.venv/bin/diagnose --format json FILE``
  grep      ``LC_ALL=C grep -c -E -f PATTERNS FILE``

PATTERNS holds every pattern of the rule pack's Hyperscan prefilter (rule patterns,
phase markers, ``when`` patterns and the traceback header), in the unanchored form the
prefilter scans with, converted to GNU ERE. ``-c`` rather than ``> /dev/null``: GNU grep
stops at the first match when its output is /dev/null, so that would time nothing.
``LC_ALL=C``: bytes, as Hyperscan scans them (its UTF-8 mode is off); ``--grep-locale``
times grep in another locale too.

Peak RSS comes from ``/usr/bin/time -v`` when present, else from
``getrusage(RUSAGE_CHILDREN)`` in a small wrapper process. Not a test: run by hand,

    .venv/bin/python bench/diagnose_bench.py [--size-mb 500] [--repeat 1] [--profile]

``--profile`` also runs cProfile over classify_stream on a prefix of the log and counts
which prefilter patterns hit most lines and report most match events.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostics.rules import RulePack, _unanchored, load_pack  # noqa: E402
from diagnostics.scan import BLOCK_SIZE, candidate_lines, classify_stream  # noqa: E402

FIXTURES = ROOT / "fixtures"
TAIL = ("startup-ok.log", "kv-cache-too-small.log")  # from fixtures/vllm-0.32
DIAGNOSE = ROOT / ".venv" / "bin" / "diagnose"
TIME_V = Path("/usr/bin/time")
MIB = 1024 * 1024
TARGET_TIME_RATIO = 2.0
TARGET_RSS_MB = 100.0

_RUSAGE_WRAPPER = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc, file=sys.stderr)
"""


# -- the log -------------------------------------------------------------------------


def real_log(path: Path) -> bytes:
    """A fixture without its leading ``#|`` provenance lines, ending with a newline."""
    lines = path.read_bytes().splitlines(keepends=True)
    while lines and lines[0].startswith(b"#|"):
        lines.pop(0)
    data = b"".join(lines)
    return data if data.endswith(b"\n") else data + b"\n"


def seed_files() -> list[Path]:
    # vllm-0.32 first: the file must not start like a RunPod console export (those are
    # read newest-first, in memory).
    return sorted((FIXTURES / "vllm-0.32").glob("*.log")) + sorted(
        (FIXTURES / "corpus").rglob("*.log")
    )


@dataclass
class BuiltLog:
    path: Path
    size: int
    lines: int
    seed_bytes: int
    seed_lines: int
    seed_files: int
    repeats: int
    tail_first_line: int  # 1-based line number where the tail starts


def build_log(path: Path, min_bytes: int) -> BuiltLog:
    files = seed_files()
    seed = b"".join(real_log(f) for f in files)
    tail = b"".join(real_log(FIXTURES / "vllm-0.32" / name) for name in TAIL)
    repeats = max(1, -(-(min_bytes - len(tail)) // len(seed)))
    with path.open("wb") as out:
        for _ in range(repeats):
            out.write(seed)
        out.write(tail)
    seed_lines = seed.count(b"\n")
    return BuiltLog(
        path=path,
        size=path.stat().st_size,
        lines=seed_lines * repeats + tail.count(b"\n"),
        seed_bytes=len(seed),
        seed_lines=seed_lines,
        seed_files=len(files),
        repeats=repeats,
        tail_first_line=seed_lines * repeats + 1,
    )


def expected_tail_verdict(pack: RulePack, built: BuiltLog) -> tuple[str, int | None]:
    """The rule and evidence line the tail alone gives, shifted to the big file."""
    tail = b"".join(real_log(FIXTURES / "vllm-0.32" / name) for name in TAIL)
    found = classify_stream(io.BytesIO(tail), pack)
    line = found.evidence.line + built.tail_first_line - 1 if found.evidence else None
    return found.rule, line


# -- patterns for grep ---------------------------------------------------------------


class Unsupported(Exception):
    """A Python regex construct GNU ERE has no equivalent for."""


_ERE_SPECIAL = set(".[]()*+?{}|^$\\")
_CLASS_ESCAPES = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "n": ""}


def to_ere(pattern: str, caseless: bool = False) -> str:
    """Python regex → GNU grep -E (C locale), matching the same lines.

    Named and non-capturing groups become plain groups, ``\\d`` becomes ``[0-9]``,
    escapes inside classes become POSIX classes, lazy quantifiers become greedy (the
    same lines match), ``(?i)`` folds letters into ``[xX]`` classes. ``[^\\n]`` becomes
    ``.`` (grep never sees the newline). Look-around and back-references raise.
    """
    if pattern.startswith("(?i)"):
        pattern, caseless = pattern[4:], True
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Unsupported("trailing backslash")
            e = pattern[i + 1]
            i += 2
            if e == "d":
                out.append("[0-9]")
            elif e == "D":
                out.append("[^0-9]")
            elif e in "wWsSb":
                out.append("\\" + e)
            elif e.isdigit():
                raise Unsupported("back-reference")
            elif e.isalnum():
                raise Unsupported(f"escape \\{e}")
            elif e in _ERE_SPECIAL:
                out.append("\\" + e)
            else:
                out.append(e)  # GNU grep warns about a stray \ before other characters
        elif c == "[":
            klass, i = _klass(pattern, i, caseless)
            out.append(klass)
        elif c == "(":
            if pattern.startswith("(?P<", i):
                i = pattern.index(">", i) + 1
            elif pattern.startswith("(?:", i):
                i += 3
            elif pattern.startswith("(?", i):
                raise Unsupported("look-around or inline flag inside the pattern")
            else:
                i += 1
            out.append("(")
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "?":
            out.append(c)  # lazy → greedy: which lines match is unchanged
            i += 2
        else:
            out.append(f"[{c.lower()}{c.upper()}]" if caseless and c.isalpha() else c)
            i += 1
    return "".join(out)


def _klass(pattern: str, i: int, caseless: bool) -> tuple[str, int]:
    i += 1
    negate = pattern.startswith("^", i)
    i += negate
    items: list[str] = []
    first = True
    while True:
        if i >= len(pattern):
            raise Unsupported("unterminated class")
        c = pattern[i]
        if c == "]" and not first:
            i += 1
            break
        first = False
        if c == "\\":
            e = pattern[i + 1]
            i += 2
            if e in _CLASS_ESCAPES:
                items.append(_CLASS_ESCAPES[e])
            elif e.isalnum():
                raise Unsupported(f"escape \\{e} inside a class")
            else:
                items.append(e)
        elif i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            items.append(pattern[i : i + 3])
            i += 3
        else:
            items.append(c)
            i += 1
    if caseless:
        items += [x.swapcase() for x in items if len(x) == 1 and x.isalpha()]
    body = [x for x in items if x]
    lead, trail = "", ""
    if "]" in body:  # POSIX: "]" first, "-" last, "^" not first
        body.remove("]")
        lead = "]"
    if "-" in body:
        body.remove("-")
        trail = "-"
    text = lead + "".join(body) + trail
    if text.startswith("^"):
        text = text[1:] + "^"
    if not text:
        if negate:
            return ".", i  # [^\n]
        raise Unsupported("empty class")
    return "[" + ("^" if negate else "") + text + "]", i


@dataclass
class GrepPatterns:
    path: Path
    total: int
    used: int
    skipped: list[str]
    seed_lines_python: int = 0
    seed_lines_grep: int = 0
    seed_mismatches: int = 0


def write_patterns(pack: RulePack, path: Path, env: dict[str, str]) -> GrepPatterns:
    converted: list[str] = []
    skipped: list[str] = []
    for p in pack.patterns:
        source = _unanchored(p.regex.pattern)
        try:
            ere = to_ere(source, bool(p.regex.flags & re.IGNORECASE))
        except Unsupported as exc:
            skipped.append(f"{source!r}: {exc}")
            continue
        # grep must take it silently (no error, no "stray \" warning).
        check = subprocess.run(
            ["grep", "-E", "-e", ere, "/dev/null"], env=env, capture_output=True, text=True
        )
        if check.returncode > 1 or check.stderr:
            skipped.append(f"{source!r}: grep: {check.stderr.strip()}")
            continue
        converted.append(ere)
    path.write_text("\n".join(converted) + "\n")
    return GrepPatterns(path, len(pack.patterns), len(converted), skipped)


def check_conversion(pack: RulePack, pats: GrepPatterns, seed: Path, env: dict[str, str]):
    """On the seed (one copy of every fixture): grep's matching lines vs Python's."""
    out = subprocess.run(
        ["grep", "-n", "-E", "-f", str(pats.path), str(seed)],
        env=env,
        capture_output=True,
        check=False,
    ).stdout
    by_grep = {int(line.split(b":", 1)[0]) for line in out.split(b"\n") if line}
    regexes = [
        re.compile(_unanchored(p.regex.pattern).encode(), p.regex.flags & re.IGNORECASE)
        for p in pack.patterns
    ]
    by_python = {
        number
        for number, line in enumerate(seed.read_bytes().split(b"\n"), 1)
        if any(rx.search(line) for rx in regexes)
    }
    pats.seed_lines_grep, pats.seed_lines_python = len(by_grep), len(by_python)
    pats.seed_mismatches = len(by_grep ^ by_python)


# -- measuring -----------------------------------------------------------------------


@dataclass
class Run:
    name: str
    command: str
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str


def measure(name: str, argv: list[str], env: dict[str, str] | None = None) -> Run:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        if TIME_V.exists():
            wrapped = [str(TIME_V), "-v", "-o", report.name, *argv]
        else:
            wrapped = [sys.executable, "-c", _RUSAGE_WRAPPER, *argv]
        start = time.perf_counter()
        proc = subprocess.run(wrapped, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if TIME_V.exists():
            text = Path(report.name).read_text()
            rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)[1])
            returncode = proc.returncode
            stdout = proc.stdout
        else:
            rss, returncode = proc.stderr.strip().splitlines()[-1].split()
            rss_kb, returncode, stdout = int(rss), int(returncode), ""
    return Run(name, " ".join(argv), seconds, rss_kb / 1024, returncode, stdout.strip())


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.seconds)


# -- profiling -----------------------------------------------------------------------


def profile(pack: RulePack, log: Path, megabytes: int, top: int = 15) -> None:
    limit = megabytes * MIB
    with log.open("rb") as stream:
        data = stream.read(limit)
    data = data[: data.rfind(b"\n") + 1]
    print(f"\n== cProfile: classify_stream on the first {len(data) / MIB:.0f} MiB ==")
    profiler = cProfile.Profile()
    profiler.enable()
    classify_stream(io.BytesIO(data), pack)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print("\n".join(out.getvalue().splitlines()[4:]))

    print("== prefilter: match events and lines hit per pattern (first block only) ==")
    block = data[:BLOCK_SIZE]
    block = block[: block.rfind(b"\n") + 1]
    events: Counter[int] = Counter()
    lines: defaultdict[int, set[int]] = defaultdict(set)

    def on_match(index, _from, to, _flags, _context):
        events[index] += 1
        lines[index].add(block.rfind(b"\n", 0, max(to - 1, 0)))

    pack.database.scan(block, match_event_handler=on_match)
    all_lines = block.count(b"\n")
    hit = set().union(*lines.values()) if lines else set()
    print(
        f"{all_lines} lines, {len(hit)} hit ({100 * len(hit) / all_lines:.1f} %), "
        f"{sum(events.values())} match events ({sum(events.values()) / all_lines:.1f} per line)"
    )
    fed = sum(1 for _ in candidate_lines([block], pack))
    print(f"lines fed to the classifier (hits, the 2 lines after each, colour lines): {fed}")
    print(f"{'events':>8} {'lines':>6}  kind   pattern")
    for index, count in events.most_common(top):
        pattern = pack.patterns[index]
        print(f"{count:8d} {len(lines[index]):6d}  {pattern.kind:6s} {pattern.regex.pattern[:90]}")


# -- main ----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500, help="minimum log size in MiB")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best counts")
    parser.add_argument("--tmpdir", help="where to build the log (default: the system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the built log")
    parser.add_argument(
        "--grep-locale", action="append", default=[], help="also time grep under this LC_ALL"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile + prefilter hit counts")
    parser.add_argument("--profile-mb", type=int, default=50)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args()

    if not DIAGNOSE.exists():
        print(f"{DIAGNOSE} not found: install the project into .venv first", file=sys.stderr)
        return 2
    pack = load_pack()
    workdir = Path(tempfile.mkdtemp(prefix="diagnose-bench-", dir=args.tmpdir))
    try:
        return _run(args, pack, workdir)
    finally:
        if args.keep:
            print(f"\nkept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(args, pack: RulePack, workdir: Path) -> int:
    c_env = {**os.environ, "LC_ALL": "C"}
    started = time.perf_counter()
    built = build_log(workdir / "vllm-big.log", args.size_mb * MIB)
    print(
        f"log: {built.size / MIB:.0f} MiB, {built.lines} lines = {built.repeats} x "
        f"{built.seed_files} real logs ({built.seed_bytes / 1e6:.2f} MB, {built.seed_lines} "
        f"lines) + {' + '.join(TAIL)}; built in {time.perf_counter() - started:.1f} s"
    )
    seed = workdir / "seed.log"
    seed.write_bytes(b"".join(real_log(f) for f in seed_files()))

    pats = write_patterns(pack, workdir / "patterns.ere", c_env)
    check_conversion(pack, pats, seed, c_env)
    print(
        f"grep patterns: {pats.used} of {pats.total} prefilter patterns "
        f"({len(pats.skipped)} skipped); on one copy of the fixtures grep -E hits "
        f"{pats.seed_lines_grep} lines, Python re {pats.seed_lines_python}, "
        f"{pats.seed_mismatches} lines differ"
    )
    for note in pats.skipped:
        print(f"  skipped: {note}")

    rule, line = expected_tail_verdict(pack, built)
    diag_runs: list[Run] = []
    grep_runs: dict[str, list[Run]] = {"C": []}
    for locale in args.grep_locale:
        grep_runs[locale] = []
    for _ in range(args.repeat):
        diag_runs.append(measure("diagnose", [str(DIAGNOSE), "--format", "json", str(built.path)]))
        for locale, runs in grep_runs.items():
            runs.append(
                measure(
                    f"grep (LC_ALL={locale})",
                    ["grep", "-c", "-E", "-f", str(pats.path), str(built.path)],
                    {**os.environ, "LC_ALL": locale},
                )
            )
    diag = best(diag_runs)
    verdict = json.loads(diag.stdout.splitlines()[-1]) if diag.stdout else {}
    found_line = (verdict.get("evidence") or {}).get("line")
    print(
        f"\ndiagnose verdict: rule {verdict.get('rule')} at line {found_line} "
        f"(expected {rule} at line {line}: "
        f"{'ok' if (verdict.get('rule'), found_line) == (rule, line) else 'MISMATCH'}), "
        f"exit {diag.returncode}"
    )
    print(f"grep matching lines: {best(grep_runs['C']).stdout}")

    rows = [diag, *(best(runs) for runs in grep_runs.values())]
    mb = built.size / 1e6
    print(f"\n{'':22} {'seconds':>8} {'MB/s':>7} {'lines/s':>11} {'peak RSS MB':>12}")
    for run in rows:
        print(
            f"{run.name:22} {run.seconds:8.2f} {mb / run.seconds:7.1f} "
            f"{built.lines / run.seconds:11,.0f} {run.peak_rss_mb:12.1f}"
        )
    grep = best(grep_runs["C"])
    ratio = diag.seconds / grep.seconds
    print(
        f"\ndiagnose / grep time: {ratio:.2f} (target <= {TARGET_TIME_RATIO:g}: "
        f"{'met' if ratio <= TARGET_TIME_RATIO else 'MISSED'}); "
        f"diagnose peak RSS {diag.peak_rss_mb:.1f} MB (target < {TARGET_RSS_MB:g}: "
        f"{'met' if diag.peak_rss_mb < TARGET_RSS_MB else 'MISSED'}); "
        f"rss ratio {diag.peak_rss_mb / grep.peak_rss_mb:.1f}"
    )
    if args.repeat > 1:
        for name, runs in [("diagnose", diag_runs), *grep_runs.items()]:
            name = name if name == "diagnose" else f"grep (LC_ALL={name})"
            print(f"  all runs {name}: {', '.join(f'{r.seconds:.2f} s' for r in runs)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "loadavg_after": os.getloadavg(),
                    "log": {k: str(v) for k, v in asdict(built).items()},
                    "patterns": {k: str(v) for k, v in asdict(pats).items()},
                    "runs": [asdict(r) | {"stdout": r.stdout[:300]} for r in rows],
                    "all_runs": [asdict(r) | {"stdout": ""} for r in diag_runs],
                    "time_ratio": ratio,
                },
                indent=2,
            )
        )
    if args.profile:
        profile(pack, built.path, args.profile_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
