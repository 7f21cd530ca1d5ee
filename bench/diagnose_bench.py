"""Benchmark ``diagnose --format json`` against a plain-pattern grep, side by side.

Four logs, built from the real vLLM logs in ``fixtures/`` (``#|`` provenance lines
stripped) under ``--workdir`` (default ``/tmp/diagnose-bench``; reused while the recipe
is unchanged, never inside the repository):

  failing    >= SIZE MiB: every real log under fixtures/corpus and fixtures/vllm-0.32,
             repeated, then ``startup-ok.log`` and ``kv-cache-too-small.log``: the last
             start fails (KV cache), after hundreds of earlier starts and failures.
  ok         >= SIZE MiB: ``startup-ok.log`` (a real start), then the request-log lines
             found in the fixtures (access lines, engine throughput lines) repeated: a
             start followed by hours of serving; it never fails.
  crashloop  >= SIZE MiB: ``kv-cache-too-small.log`` over and over: a crash loop
             captured in one file (every start fails the same way, none gets ready).
  small      ``kv-cache-too-small.log`` as recorded (20 kB).

The yardstick is ``LC_ALL=C grep -c -E -f PLAIN FILE`` with PLAIN = the 15 plain cause
patterns below (a person grepping a log for the usual causes). ``-c``, not
``> /dev/null``: GNU grep stops at the first match when its output is /dev/null.
``LC_ALL=C``: bytes, as Hyperscan reads them.

Each log: diagnose and grep alternately, ``--runs`` times each (default 3); the medians
count. Peak RSS comes from ``/usr/bin/time -v``. The small log is first run once with
an empty cache folder (``XDG_CACHE_HOME`` pointed at a fresh folder: the rule pack's
Hyperscan databases are compiled and stored), then warm (read from that cache).
Every run's verdict is checked against the verdict its reference part gives alone
(evidence line shifted to the big file).

**Fresh install** (the small log; ``--fresh`` only runs this part): what a fresh install
pays that the rows above do not see. The package's source is copied without bytecode
(as an editable install or a checkout lays it out) and run with ``PYTHONDONTWRITEBYTECODE=1``
(set on many machines and images; Python then never writes bytecode beside the source)
and an empty cache folder: the first run, then ``--fresh-runs`` next runs, interleaved
with the yardsticks (grep as above, ``python -c pass``: the interpreter's own start, and
the installed ``diagnose`` with its warm cache: the small row above). ``--fresh-venv DIR``
also builds a fresh virtual environment in DIR with ``pip install`` of this checkout (a
wheel: pip writes the bytecode at install time; DIR is made anew) and measures its
``diagnose`` the same way. Wall time and CPU time (user + system, from ``wait4``) are
both given: on a shared machine the minimum of the CPU time is the steadier figure.

``--pack-grep-mb N`` also times grep with the rule pack's own regexes (converted to
ERE) on the first N MiB of the failing log: the old yardstick, kept to show why it
misleads (it slows to a few MB/s on matching lines, so "diagnose beats grep" there
says nothing). ``--profile`` runs cProfile over ``classify_stream`` on the first
``--profile-mb`` MiB of each big log, in process. Not a test: run by hand,

    .venv/bin/python bench/diagnose_bench.py [--size-mb 500] [--runs 3] [--json out.json]
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
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import parse_args, write_json  # noqa: E402
from diagnostics.pack.matching import prefilter_form  # noqa: E402
from diagnostics.pack.rules import RulePack, load_pack  # noqa: E402
from diagnostics.scanning.scan import classify_stream  # noqa: E402

FIXTURES = ROOT / "fixtures"
VLLM = FIXTURES / "vllm-0.32"
START_OK, FAILING = "startup-ok.log", "kv-cache-too-small.log"
DIAGNOSE = ROOT / ".venv" / "bin" / "diagnose"
TIME_V = Path("/usr/bin/time")
MIB = 1024 * 1024
TARGET_TIME_RATIO = 2.0
TARGET_RSS_MB = 100.0
TARGET_SMALL_S = 0.060
RECIPE = 3  # bump when the way the logs are built changes

# What a person greps a vLLM log for: one plain pattern per common cause.
PLAIN_PATTERNS = (
    "CUDA out of memory",
    "OutOfMemoryError",
    "No available memory for the cache blocks",
    "KV cache is needed, which is larger than the available KV cache memory",
    "max_model_len",
    "Traceback \\(most recent call last\\)",
    "gated repo",
    "Repository Not Found",
    "trust_remote_code",
    "not supported for now",
    "No space left on device",
    "Connection refused",
    "NCCL error",
    "no kernel image is available",
    "EngineCore failed to start",
)
# Request-log lines: how a serving vLLM's output looks for hours after its start.
_REQUEST_LINE = re.compile(rb'"(?:GET|POST) /[^"]*HTTP/1\.1" \d{3}|Avg prompt throughput')


def real_log(path: Path) -> bytes:
    """A fixture without its leading ``#|`` provenance lines, ending with a newline."""
    lines = path.read_bytes().splitlines(keepends=True)
    while lines and lines[0].startswith(b"#|"):
        lines.pop(0)
    data = b"".join(lines)
    return data if data.endswith(b"\n") else data + b"\n"


def seed_files() -> list[Path]:
    # vllm-0.32 first: the file must not start like a RunPod console export (those are
    # read newest-first).
    return sorted(VLLM.glob("*.log")) + sorted((FIXTURES / "corpus").rglob("*.log"))


def request_lines() -> bytes:
    found = [
        line
        for path in seed_files()
        for line in real_log(path).splitlines(keepends=True)
        if _REQUEST_LINE.search(line)
    ]
    return b"".join(found)


@dataclass
class Log:
    name: str
    path: Path
    size: int = 0
    lines: int = 0
    recipe: str = ""
    # the part whose verdict the whole file must give, and the line where it starts
    reference: bytes = field(default=b"", repr=False)
    reference_first_line: int = 1


def _write(log: Log, head: bytes, body: bytes, tail: bytes, min_bytes: int) -> None:
    repeats = max(1, -(-(min_bytes - len(head) - len(tail)) // len(body))) if body else 0
    if not (log.path.exists() and _stamp(log.path).get("recipe") == log.recipe):
        with log.path.open("wb") as out:
            out.write(head)
            for _ in range(repeats):
                out.write(body)
            out.write(tail)
        lines = head.count(b"\n") + repeats * body.count(b"\n") + tail.count(b"\n")
        _stamp(log.path, {"recipe": log.recipe, "lines": lines})
    log.size = log.path.stat().st_size
    log.lines = _stamp(log.path)["lines"]


def _stamp(path: Path, value: dict | None = None) -> dict:
    stamp = path.with_suffix(".json")
    if value is not None:
        stamp.write_text(json.dumps(value))
    return json.loads(stamp.read_text()) if stamp.exists() else {}


def build_logs(workdir: Path, min_bytes: int) -> list[Log]:
    seed = b"".join(real_log(f) for f in seed_files())
    ok, failing = real_log(VLLM / START_OK), real_log(VLLM / FAILING)
    requests = request_lines()
    logs = []

    log = Log("failing", workdir / "failing.log", recipe=f"{RECIPE}:{len(seed)}:{min_bytes}")
    _write(log, b"", seed, ok + failing, min_bytes)
    log.reference = ok + failing
    log.reference_first_line = log.lines - (ok + failing).count(b"\n") + 1
    logs.append(log)

    log = Log("ok", workdir / "ok.log", recipe=f"{RECIPE}:{len(requests)}:{min_bytes}")
    _write(log, ok, requests, b"", min_bytes)
    log.reference = ok
    logs.append(log)

    log = Log("crashloop", workdir / "crashloop.log", recipe=f"{RECIPE}:{len(failing)}:{min_bytes}")
    _write(log, b"", failing, b"", min_bytes)
    log.reference = failing  # every start gives the same verdict; the first is evidence
    logs.append(log)

    logs.append(small_log(workdir))
    return logs


def small_log(workdir: Path) -> Log:
    failing = real_log(VLLM / FAILING)
    log = Log("small", workdir / "small.log", recipe=f"{RECIPE}:{len(failing)}")
    _write(log, failing, b"", b"", 0)
    log.reference = failing
    return log


def expected_verdict(pack: RulePack, log: Log) -> dict:
    found = classify_stream(io.BytesIO(log.reference), pack).to_dict()
    if found.get("evidence"):
        found["evidence"]["line"] += log.reference_first_line - 1
    return found


def verdict_of(stdout: str) -> dict:
    data = json.loads(stdout.strip().splitlines()[-1])
    data.pop("file", None)
    return data


# -- measuring -----------------------------------------------------------------------


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str


def measure(argv: list[str], env: dict[str, str] | None = None) -> Run:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        wrapped = [str(TIME_V), "-v", "-o", report.name, *argv]
        start = time.perf_counter()
        proc = subprocess.run(wrapped, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        text = Path(report.name).read_text()
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    rss_kb = int(found[1]) if found else 0
    return Run(seconds, rss_kb / 1024, proc.returncode, proc.stdout)


@dataclass
class Row:
    log: str
    size_mb: float
    lines: int
    diagnose_s: list[float]
    grep_s: list[float]
    diagnose_rss_mb: float
    grep_rss_mb: float
    grep_count: str
    verdict_ok: bool
    verdict: str
    cold_s: float | None = None

    @property
    def diagnose(self) -> float:
        return statistics.median(self.diagnose_s)

    @property
    def grep(self) -> float:
        return statistics.median(self.grep_s)


def bench_log(log: Log, pack: RulePack, plain: Path, runs: int, env: dict[str, str]) -> Row:
    c_env = {**env, "LC_ALL": "C"}
    expected = expected_verdict(pack, log)
    diag_runs: list[Run] = []
    grep_runs: list[Run] = []
    for _ in range(runs):
        diag_runs.append(measure([str(DIAGNOSE), "--format", "json", str(log.path)], env))
        grep_runs.append(measure(["grep", "-c", "-E", "-f", str(plain), str(log.path)], c_env))
    verdicts = [verdict_of(r.stdout) for r in diag_runs]
    ok = all(v == expected for v in verdicts)
    got = verdicts[-1]
    shown = f"{got.get('state')} {got.get('rule') or ''}".strip()
    if got.get("evidence"):
        shown += f" @ line {got['evidence']['line']:,}"
    if not ok:
        shown += (
            f" (expected {expected.get('rule')} @ {(expected.get('evidence') or {}).get('line')})"
        )
    return Row(
        log.name,
        log.size / 1e6,
        log.lines,
        [r.seconds for r in diag_runs],
        [r.seconds for r in grep_runs],
        max(r.peak_rss_mb for r in diag_runs),
        max(r.peak_rss_mb for r in grep_runs),
        grep_runs[-1].stdout.strip(),
        ok,
        shown,
    )


# -- a fresh install -------------------------------------------------------------------

ENTRY = "import sys; from diagnostics.command.cli import run; sys.exit(run())"


@dataclass
class Timed:
    wall_s: float
    cpu_s: float
    returncode: int
    stdout: str


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Timed:
    """Wall time and CPU time (user + system of the process and what it waited for)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, text=True)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stdout:
        proc.stdout.close()
    return Timed(
        time.perf_counter() - start, usage.ru_utime + usage.ru_stime, proc.returncode, stdout
    )


@dataclass
class FreshRow:
    case: str
    first: Timed
    next_wall_s: list[float]
    next_cpu_s: list[float]
    verdict_ok: bool


def copy_install(workdir: Path) -> Path:
    """The package's source and rules, copied without bytecode (made anew each time)."""
    site = workdir / "fresh-source"
    shutil.rmtree(site, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "diagnostics", site / "diagnostics", ignore=ignore)
    shutil.copytree(ROOT / "rules", site / "rules", ignore=ignore)
    return site


def venv_install(folder: Path) -> Path:
    """A fresh virtual environment in ``folder`` with this checkout ``pip install``ed."""
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    installed = subprocess.run([*pip, str(ROOT)], capture_output=True, text=True)
    if installed.returncode != 0:
        raise SystemExit(f"pip install failed:\n{installed.stderr[-3000:]}")
    return folder / "bin" / "diagnose"


def bench_fresh(
    small: Log, pack: RulePack, plain: Path, runs: int, workdir: Path, venv: Path | None
) -> tuple[list[FreshRow], dict[str, list[Timed]]]:
    """First and next runs of a fresh install, interleaved with the yardsticks."""
    expected = expected_verdict(pack, small)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGNOSE_CACHE")}
    base["PYTHONDONTWRITEBYTECODE"] = "1"
    cases: list[tuple[str, list[str], dict[str, str], Path | None]] = []
    site = copy_install(workdir)
    cases.append(
        (
            "source, no bytecode",
            [sys.executable, "-c", ENTRY],
            {**base, "PYTHONPATH": str(site)},
            site.parent,  # not the repository: its diagnostics/ would be imported instead
        )
    )
    if venv is not None:
        cases.append(("pip install (wheel)", [str(venv_install(venv))], dict(base), None))
    args = ["--format", "json", str(small.path)]
    caches = []
    rows = []
    for name, argv, env, cwd in cases:
        cache = Path(tempfile.mkdtemp(prefix="diagnose-bench-fresh-"))
        caches.append(cache)
        env["XDG_CACHE_HOME"] = str(cache)
        first = timed([*argv, *args], env, cwd)
        rows.append(FreshRow(name, first, [], [], verdict_of(first.stdout) == expected))
    warm_env = {**os.environ, "XDG_CACHE_HOME": str(caches[0])}
    warm_env.pop("PYTHONDONTWRITEBYTECODE", None)  # as the small row: bytecode written,
    warm_env["PYTHONPYCACHEPREFIX"] = str(caches[0] / "pycache")  # not beside the source
    yardsticks: dict[str, list[Timed]] = {"grep": [], "python -c pass": [], "installed, warm": []}
    try:
        for _ in range(runs):
            for row, (_, argv, env, cwd) in zip(rows, cases, strict=True):
                run = timed([*argv, *args], env, cwd)
                row.next_wall_s.append(run.wall_s)
                row.next_cpu_s.append(run.cpu_s)
                row.verdict_ok = row.verdict_ok and verdict_of(run.stdout) == expected
            c_env = {**os.environ, "LC_ALL": "C"}
            grep = ["grep", "-c", "-E", "-f", str(plain), str(small.path)]
            yardsticks["grep"].append(timed(grep, c_env))
            yardsticks["python -c pass"].append(timed([sys.executable, "-c", "pass"], warm_env))
            yardsticks["installed, warm"].append(timed([str(DIAGNOSE), *args], warm_env))
    finally:
        for cache in caches:
            shutil.rmtree(cache, ignore_errors=True)
    return rows, yardsticks


def report_fresh(rows: list[FreshRow], yardsticks: dict[str, list[Timed]]) -> dict:
    def ms(values: list[float]) -> str:
        return f"{min(values) * 1000:.0f} / {statistics.median(values) * 1000:.0f}"

    print("\n== a fresh install, the small log (ms: min / median) ==")
    print("| case | first run: wall, CPU | next runs: wall | next runs: CPU | verdict |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row.case} | {row.first.wall_s * 1000:.0f}, {row.first.cpu_s * 1000:.0f} | "
            f"{ms(row.next_wall_s)} | {ms(row.next_cpu_s)} | "
            f"{'as expected' if row.verdict_ok else 'MISMATCH'} |"
        )
    for name, timings in yardsticks.items():
        walls, cpus = [t.wall_s for t in timings], [t.cpu_s for t in timings]
        print(f"| yardstick: {name} | | {ms(walls)} | {ms(cpus)} | |")
    return {
        "rows": [
            {
                "case": row.case,
                "first_wall_s": row.first.wall_s,
                "first_cpu_s": row.first.cpu_s,
                "next_wall_s": row.next_wall_s,
                "next_cpu_s": row.next_cpu_s,
                "verdict_ok": row.verdict_ok,
            }
            for row in rows
        ],
        "yardsticks": {
            name: {"wall_s": [t.wall_s for t in ts], "cpu_s": [t.cpu_s for t in ts]}
            for name, ts in yardsticks.items()
        },
    }


# -- the old yardstick: grep with the pack's own regexes -----------------------------


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


def write_pack_patterns(pack: RulePack, path: Path) -> tuple[int, int]:
    converted = []
    for p in pack.patterns:
        try:
            ere = to_ere(prefilter_form(p.regex.pattern), bool(p.regex.flags & re.IGNORECASE))
        except Unsupported:
            continue
        check = subprocess.run(
            ["grep", "-E", "-e", ere, "/dev/null"],
            env={**os.environ, "LC_ALL": "C"},
            capture_output=True,
            text=True,
        )
        if check.returncode <= 1 and not check.stderr:
            converted.append(ere)
    path.write_text("\n".join(converted) + "\n")
    return len(converted), len(pack.patterns)


def pack_grep(pack: RulePack, failing: Log, workdir: Path, megabytes: int, plain: Path) -> None:
    part = workdir / f"failing-{megabytes}mb.log"
    with failing.path.open("rb") as src:
        data = src.read(megabytes * MIB)
    part.write_bytes(data[: data.rfind(b"\n") + 1])
    used, total = write_pack_patterns(pack, workdir / "pack.ere")
    c_env = {**os.environ, "LC_ALL": "C"}
    size = part.stat().st_size / 1e6
    print(f"\n== the old yardstick on the first {size:.0f} MB of the failing log ==")
    for name, patterns in (("pack regexes", workdir / "pack.ere"), ("plain causes", plain)):
        run = measure(["grep", "-c", "-E", "-f", str(patterns), str(part)], c_env)
        print(
            f"grep -c -E -f <{name}> : {run.seconds:6.2f} s  {size / run.seconds:7.1f} MB/s  "
            f"{run.stdout.strip()} matching lines"
            + (f"  ({used} of {total} pack patterns)" if name == "pack regexes" else "")
        )
    part.unlink()


# -- profiling -----------------------------------------------------------------------


def profile(pack: RulePack, log: Log, megabytes: int, top: int = 14) -> None:
    with log.path.open("rb") as stream:
        data = stream.read(megabytes * MIB)
    data = data[: data.rfind(b"\n") + 1]
    print(f"\n== cProfile: classify_stream on the first {len(data) / MIB:.0f} MiB of {log.name} ==")
    profiler = cProfile.Profile()
    profiler.enable()
    classify_stream(io.BytesIO(data), pack)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print("\n".join(out.getvalue().splitlines()[4:]))


# -- main ----------------------------------------------------------------------------


def main() -> int:
    global DIAGNOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500, help="minimum size of the big logs")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the median counts")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/diagnose-bench"))
    parser.add_argument("--only", action="append", help="failing, ok, crashloop or small")
    parser.add_argument("--pack-grep-mb", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-mb", type=int, default=50)
    parser.add_argument("--fresh", action="store_true", help="only the fresh-install part")
    parser.add_argument("--fresh-runs", type=int, default=11, help="next runs of a fresh install")
    parser.add_argument(
        "--fresh-venv", type=Path, help="also pip install this checkout into a new venv here"
    )
    parser.add_argument("--diagnose", type=Path, default=DIAGNOSE, help="the installed command")
    args = parse_args(parser)
    DIAGNOSE = args.diagnose
    works = DIAGNOSE.exists() and subprocess.run([str(DIAGNOSE), "--help"], capture_output=True)
    if not works or works.returncode != 0:
        print(
            f"{DIAGNOSE} does not run: install the project into .venv first (pip install -e .)",
            file=sys.stderr,
        )
        return 2
    if ROOT in args.workdir.resolve().parents:
        print("--workdir must be outside the repository", file=sys.stderr)
        return 2
    args.workdir.mkdir(parents=True, exist_ok=True)
    pack = load_pack()
    plain = args.workdir / "plain.ere"
    plain.write_text("\n".join(PLAIN_PATTERNS) + "\n")
    small = small_log(args.workdir)
    if args.fresh:
        fresh = report_fresh(
            *bench_fresh(small, pack, plain, args.fresh_runs, args.workdir, args.fresh_venv)
        )
        print(f"  load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        write_json(args.json, {"date": datetime.now(UTC).isoformat(timespec="seconds"), **fresh})
        return 0
    started = time.perf_counter()
    logs = build_logs(args.workdir, args.size_mb * MIB)
    if args.only:
        logs = [log for log in logs if log.name in args.only]
    print(f"logs ready in {time.perf_counter() - started:.1f} s under {args.workdir}")

    cache = Path(tempfile.mkdtemp(prefix="diagnose-bench-cache-"))
    # As installed: bytecode written once and read after (this shell may forbid it), under
    # the cache folder: bytecode written beside a checkout's source goes stale as it is
    # edited, and Python (not allowed to write it) then compiles those modules every run.
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPYCACHEPREFIX": str(cache / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows = []
    try:
        for log in logs:
            cold = None
            if log.name == "small":
                shutil.rmtree(cache / "runpod-vllm-worker", ignore_errors=True)
                cold = measure([str(DIAGNOSE), "--format", "json", str(log.path)], env).seconds
            row = bench_log(log, pack, plain, args.runs, env)
            row.cold_s = cold
            rows.append(row)
            print(
                f"{row.log:10} {row.size_mb:8.1f} MB  diagnose {row.diagnose:7.3f} s  "
                f"grep {row.grep:7.3f} s  {row.diagnose / row.grep:5.2f}x  "
                f"RSS {row.diagnose_rss_mb:5.1f} MB  {row.verdict}"
                + ("" if row.verdict_ok else "  VERDICT MISMATCH"),
                flush=True,
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    print(
        "\n| log | size | diagnose s | grep s | × grep | diagnose RSS MB | grep RSS MB | verdict |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        cold_text = f" (cold cache: {row.cold_s:.3f})" if row.cold_s is not None else ""
        print(
            f"| {row.log} | {row.size_mb:,.1f} MB | {row.diagnose:.3f}{cold_text} | "
            f"{row.grep:.3f} | "
            f"{row.diagnose / row.grep:.2f} | {row.diagnose_rss_mb:.1f} | {row.grep_rss_mb:.1f} | "
            f"{row.verdict} |"
        )
    for row in rows:
        print(
            f"  all runs {row.log}: diagnose {', '.join(f'{s:.3f}' for s in row.diagnose_s)}; "
            f"grep {', '.join(f'{s:.3f}' for s in row.grep_s)}"
        )
    print(f"  load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    met = []
    for row in rows:
        if row.log == "small":
            met.append(row.diagnose <= TARGET_SMALL_S)
        else:
            met.append(row.diagnose / row.grep <= TARGET_TIME_RATIO)
        met.append(row.diagnose_rss_mb < TARGET_RSS_MB and row.verdict_ok)
    fresh_rows, yardsticks = bench_fresh(
        small, pack, plain, args.fresh_runs, args.workdir, args.fresh_venv
    )
    fresh = report_fresh(fresh_rows, yardsticks)
    met.append(all(row.verdict_ok for row in fresh_rows))
    print(f"targets: {'all met' if all(met) else 'NOT all met'}")
    write_json(
        args.json,
        {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "loadavg_after": os.getloadavg(),
            "rows": [
                asdict(r) | {"diagnose_median": r.diagnose, "grep_median": r.grep} for r in rows
            ],
            "fresh_install": fresh,
        },
    )
    if args.pack_grep_mb:
        failing = next(
            log for log in build_logs(args.workdir, args.size_mb * MIB) if log.name == "failing"
        )
        pack_grep(pack, failing, args.workdir, args.pack_grep_mb, plain)
    if args.profile:
        for log in logs:
            if log.name != "small":
                profile(pack, log, args.profile_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
