"""Suite-wide checks.

The secret check: every worker a test starts carries planted secrets of every name
form (``tests.support.vllm_env.PLANTED_ENV``: HF_TOKEN, *_API_KEY, *_ACCESS_KEY,
*_PASSWORD, *_CREDENTIALS), and a test may plant more (the ``planted_secrets`` list:
URL credentials, header, flag and key=value forms). After each test, every file the
test wrote under its tmp_path (worker stdout/stderr, logs) and every answer and stream
chunk a local job queue received must be free of all of them.

The reliability doc: tests record outcomes with the ``reliability`` fixture; a row is
written only for a test that passed in this run, and a row that depends on other tests
(``requires=``) only when those passed too. Under pytest-xdist the test processes hand
their outcomes to the controller, which writes the doc once.

Test processes (pytest-xdist, ``-n auto`` in pyproject.toml: one per core, two per core
without the real-vLLM tests, see ``pytest_xdist_auto_num_workers``): each file runs whole
in one process, and the files with real-vLLM tests run first, one after another, in one process
(``tests/support/scheduling.py``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support import tiers, zygote
from tests.support.queue_server import QueueServer
from tests.support.scheduling import FileScheduling, by_expected_time, record_durations
from tests.support.vllm_env import PLANTED_ENV

_MAX_SCANNED = 64 * 1024 * 1024


def _keep_bytecode() -> None:
    """Under PYTHONDONTWRITEBYTECODE every process the suite starts (each test process,
    each worker, each stand-in) compiled the project's modules again, and pytest rewrote
    every test module again in each test process: seconds of CPU per test process, a
    tenth of a second per worker. The bytecode goes to a cache folder outside the
    checkout instead (PYTHONPYCACHEPREFIX, inherited by the processes started here), so
    none is written beside the sources, as the setting asks."""
    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    prefix = str(Path(cache) / "runpod-vllm-worker" / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_keep_bytecode()


def _cache_snapshot_sites() -> None:
    """syrupy 7 decides which snapshots went unused by asking, for every snapshot and
    every test of its file, whether the snapshot file sits beside the test, resolving
    both paths each time: 170,000 ``Path.resolve`` calls at the end of every test
    process of this suite (seconds of CPU each). The answer depends only on the two
    paths, so it is kept; the check itself (an unused snapshot fails the run) is not
    changed."""
    from syrupy.location import PyTestLocation

    decide = PyTestLocation._matches_test_site
    known: dict[tuple[str, str], bool] = {}

    def matches_test_site(self: PyTestLocation, loc: Path) -> bool:
        key = (str(self.filepath), str(loc))
        if key not in known:
            known[key] = decide(self, loc)
        return known[key]

    PyTestLocation._matches_test_site = matches_test_site  # type: ignore[method-assign]


_cache_snapshot_sites()


_PLANTED = pytest.StashKey[list[str]]()


@pytest.fixture
def planted_secrets(request) -> list[str]:
    """Secret values a test plants (beyond PLANTED_ENV); the leak check looks for them too."""
    return request.node.stash[_PLANTED]


@pytest.fixture(autouse=True)
def no_secret_leaks(request):
    recursion = sys.getrecursionlimit()  # process-wide: a test that raises it restores it
    before = len(QueueServer.started)
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    extra = request.node.stash[_PLANTED] = []
    yield
    planted = dict(PLANTED_ENV)
    planted.update({f"planted #{i + 1}": value for i, value in enumerate(extra)})
    leaks = []
    for queue in QueueServer.started[before:]:
        for job_id, done in queue.results.items():
            try:
                stream = queue.job(job_id).stream
            except RecursionError:  # an input nested too deep to copy (test_hostile_jobs)
                stream = []
            blob = json.dumps([done, stream], default=str)
            leaks += [f"{name} in job {job_id}" for name, v in planted.items() if v in blob]
    if root is not None:
        for path in root.rglob("*"):
            if not path.is_file() or path.is_symlink() or path.stat().st_size >= _MAX_SCANNED:
                continue
            data = path.read_bytes()
            where = str(path.relative_to(root))
            leaks += [f"{name} in {where}" for name, v in planted.items() if v.encode() in data]
    assert not leaks, f"planted secrets leaked: {leaks}"
    assert sys.getrecursionlimit() == recursion, "the test left the recursion limit changed"


@pytest.fixture
def hub_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let this process's huggingface_hub client reach the loopback hub
    (tests/support/hub_server.py): it read HF_HUB_OFFLINE at import. No telemetry, and no
    HF_TOKEN from the caller's environment."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


_OUTCOMES: list[tuple[str, str, str, str, tuple[str, ...]]] = []
_PASSED: set[str] = set()


@pytest.fixture
def reliability(request):
    """Record an outcome: (fault, expected state, what happened). The row is written only
    if this test passes, and each test named in ``requires`` passed in the same run."""

    def record(fault: str, expected: str, outcome: str, requires: tuple[str, ...] = ()) -> None:
        name = request.node.nodeid.split("::")[-1]
        _OUTCOMES.append((name, fault, expected, outcome, tuple(requires)))

    return record


def pytest_configure(config):
    """Every test process learns whether this is the quick run (``tests/support/tiers.py``);
    the xdist controller starts the one fork server its test processes share
    (``tests/support/zygote.py``), unless workers are started plainly."""
    tiers.QUICK = tiers.leaves_out_vllm(config.option.markexpr)
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if os.environ.get("WORKER_FORK_SERVER", "1") == "0":
        return
    config.add_cleanup(zygote.start_shared().close)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return FileScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one test process per core; without the real-vLLM tests
    (``-m "not vllm"``) two per core (at most 4), since the tests of worker processes
    mostly wait on their children: measured on 2 cores with one busy, 96 s with 2
    processes, 83 s with 4. A run with the real-vLLM tests keeps one per core: with three
    processes (two running vLLM groups) on 2 cores and one of them busy, the tests that
    bound a latency (a 408 at the body timeout, /ping during an attack) missed it."""
    cores = os.cpu_count() or 1
    if tiers.leaves_out_vllm(config.option.markexpr):
        return min(2 * cores, 4)
    return cores


def pytest_collection_modifyitems(config, items):
    # The longest units of work first: the vLLM groups, then the longest files
    # (tests/support/scheduling.py); a file's tests keep their order.
    items.sort(key=lambda item: by_expected_time(item.nodeid))


_SECONDS: dict[str, float] = {}  # per test file, setup and teardown included


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _PASSED.add(report.nodeid.split("::")[-1].split("[")[0])
    path = report.nodeid.split("::", 1)[0]
    _SECONDS[path] = _SECONDS.get(path, 0.0) + report.duration


SOAK_NOTE = (
    "\nNot a test: the soak benchmark (`bench/soak.py`, 30 concurrent streaming jobs for 10 "
    "minutes through the real SDK job loop) is in `docs/benchmarks.md` §3, with its errors "
    "and the worker's RSS at the start and the end.\n"
    "\nKnown limits (by design, see the modules named):\n\n"
    "- Secrets are recognised by name (`diagnostics/redaction/secrets.py`: names ending in TOKEN, KEY, "
    "SECRET, PASSWORD, PASS, CREDENTIALS...) and by shape (`diagnostics/redaction/redact.py`); an "
    "unlabelled value of no known shape in vLLM's output cannot be recognised unless it is "
    "the value of a secret variable (those are redacted wherever they appear, from 6 "
    "characters).\n"
    "- A line of vLLM output longer than 1 MiB is read in pieces cut at a break (whitespace, "
    "quote, bracket, comma); only a run of over 64 KiB with no break is cut at 1 MiB exactly.\n"
    "- A job-take body that is not valid JSON or not UTF-8 is dropped, as the RunPod SDK drops "
    "it (no job id in it can be trusted); one that is valid but nested deeper than Python's "
    "parser allows is read by `worker/queue/take_body.py` and its deep jobs answered as bad input.\n"
    "- When the worker dies (even by SIGKILL) vLLM gets SIGTERM (parent-death signal, "
    "`worker/supervision/vllm_process.py`), which vLLM handles while loading and serving by shutting "
    "down its engine processes too; a vLLM hung so that it ignores SIGTERM would outlive "
    "the worker (SIGKILL instead would orphan its engine processes, and their GPU memory).\n"
)


# From this heading on, docs/reliability.md is not the fault table: the HTTP limits and
# the input table (tests/worker/test_inputs.py writes its part); rewriting keeps it as is.
KEPT_FROM = "## HTTP limits"


def pytest_sessionfinish(session, exitstatus):
    """With TEST_DURATIONS=1, record each file's wall time for the scheduling of later
    runs. With RELIABILITY_DOC=1, update docs/reliability.md with the recorded outcomes
    (rows of tests not run this time are kept)."""
    controller = getattr(session.config, "workeroutput", None) is None
    if controller and os.environ.get("TEST_DURATIONS") == "1" and exitstatus == 0:
        record_durations(_SECONDS)
    if os.environ.get("RELIABILITY_DOC") != "1":
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist test process: the controller writes the doc
        workeroutput["reliability"] = json.dumps(_OUTCOMES)
        return
    if not _OUTCOMES:
        return
    if not any(t in _PASSED and all(r in _PASSED for r in q) for t, *_, q in _OUTCOMES):
        return
    path = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"
    rows: dict[str, str] = {}
    kept = ""  # the sections after the fault table's notes (HTTP limits, inputs): kept
    if path.exists():
        existing = path.read_text()
        if KEPT_FROM in existing:
            existing, kept = existing.split(KEPT_FROM, 1)
            kept = "\n" + KEPT_FROM + kept
        for line in existing.splitlines():
            if line.startswith("| ") and line.endswith("` |") and "`test_" in line:
                rows[line.rsplit("`", 2)[1]] = line
    for test, fault, expected, outcome, requires in _OUTCOMES:
        if test in _PASSED and all(r in _PASSED for r in requires):
            rows[test] = f"| {fault} | {expected} | {outcome} | `{test}` |"
    text = (
        "# Reliability: faults injected and what happened\n\n"
        "Produced by the suite: `RELIABILITY_DOC=1 ./scripts/test` (or any part of it, e.g. "
        "`tests/integration tests/worker/test_hostile_worker.py tests/diagnostics/test_fuzz.py`) "
        "rewrites the rows of the tests that ran; a row is written only when its test (and "
        "any test it relies on) passed in that run, and the suite asserts every outcome.\n\n"
        "| fault | expected state | outcome | test |\n|---|---|---|---|\n"
        + "\n".join(rows[k] for k in sorted(rows))
        + "\n"
        + SOAK_NOTE
        + kept
    )
    path.write_text(text)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: a test process ended; keep the outcomes it recorded."""
    recorded = getattr(node, "workeroutput", {}).get("reliability")
    if recorded:
        _OUTCOMES.extend((t, f, e, o, tuple(q)) for t, f, e, o, q in json.loads(recorded))
