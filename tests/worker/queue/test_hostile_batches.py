"""Hostile job-take answers: one bad element never costs the others, and a stop never
waits on the queue.

runpod 1.12's job loop trusts every element of a job-take answer. One element without a
usable id (none, ``null``, a string, a list as id) raised in its loop: the worker exited
1 and the rest of the batch, already taken, was never answered. An integer id made the
SDK's job list raise on every job-take: the loop spun at 100 % CPU and took nothing
more while the heartbeat still said alive. Two jobs with one id both ran and were
answered twice; a single job without ``input`` was taken and never answered. And a stop
waited for a job-take the queue held open (45 s here), long past the platform's kill.

The fix is one check (``worker.queue.job_check.JobCheck``, its rules in that module's
doc) and a fetch loop that backs off and is cancelled by the stop
(``worker.queue.intake``). The table below is walked twice: through the check alone,
and through the real SDK job loop of a real worker against the loopback queue.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from dataclasses import dataclass

import pytest
import structlog.testing

from tests.support.queue_server import QueueServer
from tests.support.vllm_env import events, stand_in, stand_in_env, start_worker
from worker.queue import intake
from worker.queue.job_check import INPUT_ERROR, MAX_ID_LENGTH, JobCheck
from worker.queue.job_fetch import parse_jobs

DEADLINE = 60.0
OK = {"openai_route": "/v1/models"}  # a GET the ready stand-in answers at once
SERVE = stand_in("scripted_vllm", "serve")


@dataclass(frozen=True)
class Row:
    """One hostile element and what must become of it.

    ``answer``: None (dropped: nothing can answer it), "ok" (run and answered), or
    "bad_input" (answered with invalid_request_error); ``id`` is where the answer goes.
    """

    name: str
    element: object
    answer: str | None
    id: str | None = None


HUGE_ID = "h" * 100_000
ODD_ID = "Az09-._~!$&'()*+;=:@"  # every character a URL path carries as itself, but % and ,
ROWS = [
    Row("plain job first", {"id": "plain-first", "input": OK}, "ok", "plain-first"),
    Row("missing id", {"input": OK}, None),
    Row("null element", None, None),
    Row("list as id", {"id": ["list-id"], "input": OK}, None),
    Row("object as id", {"id": {"k": "dict-id"}, "input": OK}, None),
    Row("integer id", {"id": 7, "input": OK}, None),
    Row("float id", {"id": 7.5, "input": OK}, None),
    Row("boolean id", {"id": True, "input": OK}, None),
    Row("empty string id", {"id": "", "input": OK}, None),
    Row("huge string id", {"id": HUGE_ID, "input": OK}, None),
    Row("id one too long", {"id": "L" * (MAX_ID_LENGTH + 1), "input": OK}, None),
    Row("id with a slash", {"id": "a/b", "input": OK}, None),
    Row("id with a comma", {"id": "a,b", "input": OK}, None),
    Row("id with a percent escape", {"id": "a%2Fb", "input": OK}, None),
    Row("id '..'", {"id": "..", "input": OK}, None),
    Row("id with a newline", {"id": "a\nb", "input": OK}, None),
    Row("string element", "just-a-string", None),
    Row("number element", 42, None),
    Row("list element", [{"id": "in-a-list", "input": OK}], None),
    Row("duplicate in batch (1st)", {"id": "dup-batch", "input": OK}, "ok", "dup-batch"),
    Row("duplicate in batch (2nd)", {"id": "dup-batch", "input": OK}, None),
    Row("id for a later batch", {"id": "dup-across", "input": OK}, "ok", "dup-across"),
    Row("missing input", {"id": "no-input"}, "bad_input", "no-input"),
    Row("input null", {"id": "null-input", "input": None}, "bad_input", "null-input"),
    Row("input a list", {"id": "list-input", "input": [OK]}, "bad_input", "list-input"),
    Row("input a string", {"id": "str-input", "input": "hi"}, "bad_input", "str-input"),
    Row(
        "brings its own answer field",
        {"id": "forged", "input": OK, INPUT_ERROR: "forged answer"},
        "ok",
        "forged",
    ),
    Row(
        "fields the SDK's Job cannot take",
        {"id": "odd-fields", "input": OK, "self": 1, "__class__": "x", "__dict__": 2},
        "ok",
        "odd-fields",
    ),
    Row("max-length id", {"id": "M" * MAX_ID_LENGTH, "input": OK}, "ok", "M" * MAX_ID_LENGTH),
    Row("every usable character", {"id": ODD_ID, "input": OK}, "ok", ODD_ID),
    Row("id '.'", {"id": ".", "input": OK}, None),
    Row("plain job last", {"id": "plain-last", "input": OK}, "ok", "plain-last"),
]
# The second batch: a repeat of an id answered in the first, then a plain job.
LATER = [
    Row("duplicate across batches", {"id": "dup-across", "input": OK}, None),
    Row("plain job after", {"id": "plain-after", "input": OK}, "ok", "plain-after"),
]
# Whole job-take bodies (the single job-take answers one object; a batch is a list),
# each dropped one followed by a plain job (a run of dropped answers is backed off).
_BAD_BODIES = [
    Row("single job without id", {"input": OK}, None),
    Row("single job with an integer id", {"id": 8, "input": OK}, None),
    Row("batch that is a number", 42, None),
    Row("batch that is a string", "jobs", None),
    Row("batch that is true", True, None),
    Row("batch that is null", None, None),
    Row("batch that is an object of jobs", {"jobs": [{"id": "wrapped", "input": OK}]}, None),
]
BODIES = [
    Row("single job without input", {"id": "single-no-input"}, "bad_input", "single-no-input")
]
for _n, _row in enumerate(_BAD_BODIES):
    _plain = f"single-plain-{_n}"
    BODIES += [_row, Row(f"plain after {_row.name}", {"id": _plain, "input": OK}, "ok", _plain)]


def _answered(rows: list[Row]) -> dict[str, str]:
    return {row.id: row.answer for row in rows if row.answer is not None and row.id}


# -- the check alone -----------------------------------------------------------------


def test_the_check_keeps_exactly_the_usable_jobs():
    check = JobCheck()
    first = check.accept([row.element for row in ROWS])
    later = check.accept([row.element for row in LATER])
    jobs = first + later
    assert [job["id"] for job in jobs] == list(_answered(ROWS + LATER))
    for job, (_, answer) in zip(jobs, _answered(ROWS + LATER).items(), strict=True):
        assert (INPUT_ERROR in job) == (answer == "bad_input"), job["id"]
        assert not {"self", "__class__", "__dict__"} & set(job)
    forged = next(job for job in jobs if job["id"] == "forged")
    assert INPUT_ERROR not in forged  # a job cannot bring its own answer
    assert check.dropped == sum(row.answer is None for row in ROWS + LATER)


@pytest.mark.parametrize("row", BODIES, ids=lambda row: row.name)
def test_every_kind_of_body_is_read_or_dropped(row):
    jobs = parse_jobs(json.dumps(row.element).encode())
    assert [job["id"] for job in jobs] == ([row.id] if row.answer else [])


def test_duplicates_are_remembered_with_bounded_memory():
    check = JobCheck(max_seen=3)
    assert len(check.accept([{"id": f"j{n}", "input": {}} for n in range(5)])) == 5
    assert check.accept([{"id": "j4", "input": {}}, {"id": "j2", "input": {}}]) == []
    assert len(check._seen) == 3
    # j0 fell out of the window: it would run again (the bound of the memory).
    assert [job["id"] for job in check.accept([{"id": "j0", "input": {}}])] == ["j0"]


def test_a_huge_batch_of_bad_elements_logs_a_bounded_number_of_lines():
    check = JobCheck()
    with structlog.testing.capture_logs() as logged:
        assert check.accept([{"id": n} for n in range(10_000)]) == []
    assert len(logged) == 11
    assert logged[-1]["event"] == "job.dropped_more" and logged[-1]["dropped"] == 9_990


# -- the real SDK job loop -----------------------------------------------------------


def _ready_worker(queue: QueueServer, tmp_path, **extra: str):
    env = stand_in_env(tmp_path, SERVE, MAX_CONCURRENCY="64", **queue.env(), **extra)
    proc = start_worker(env, tmp_path)
    probe = queue.submit(OK, "probe")
    try:
        queue.wait_done(probe, DEADLINE)  # ready and taking jobs
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(DEADLINE)
        raise
    return proc


def _stop(proc) -> int:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(DEADLINE)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _kind(done: dict) -> str:
    if "error" in done:
        return json.loads(done["error"])["type"]
    return "ok"


def test_every_hostile_element_costs_only_itself(tmp_path, reliability):
    with QueueServer() as queue:
        proc = _ready_worker(queue, tmp_path)
        try:
            queue.submit_raw(*(row.element for row in ROWS))  # one batch: the worker has
            queue.wait_for(lambda: queue.queued == 0, DEADLINE, "the batch taken")  # 64 slots
            assert len(queue.hits("job-take-batch")) >= 1
            for job_id in _answered(ROWS):
                queue.wait_done(job_id, DEADLINE)
            queue.submit_raw(*(row.element for row in LATER))
            for row in BODIES:
                queue.answer_next(row.element)
            for job_id in _answered(LATER + BODIES):
                queue.wait_done(job_id, DEADLINE)
            # The loop keeps taking jobs after all of it.
            after = [queue.submit(OK) for _ in range(3)]
            for job_id in after:
                assert _kind(queue.wait_done(job_id, DEADLINE)) == "ok"
            assert queue.queued == 0
        finally:
            code = _stop(proc)
    assert code == 0
    expected = {**_answered(ROWS + LATER + BODIES), "probe": "ok"}
    expected.update(dict.fromkeys(after, "ok"))
    answered = {job_id: _kind(done) for job_id, done in queue.results.items()}
    assert answered == {
        job_id: "invalid_request_error" if kind == "bad_input" else "ok"
        for job_id, kind in expected.items()
    }
    assert {job_id: queue.job(job_id).done_count for job_id in answered} == dict.fromkeys(
        answered, 1
    )  # exactly once: the duplicates were not run again
    results = [h for h in queue.hits() if h.kind in ("job-done", "job-stream")]
    assert {h.outcome for h in results} == {200}  # nothing posted for an unusable id
    warnings = [e for e in events(tmp_path) if e.get("event") == "job.dropped"]
    assert all(e["level"] == "warning" for e in warnings)
    assert sum(len(e.get("id") or "") for e in warnings) < 2000  # the huge id is cut
    dropped = sum(row.answer is None for row in ROWS + LATER + BODIES)
    reliability(
        f"a job-take batch of {len(ROWS)} elements, {sum(r.answer is None for r in ROWS)} "
        "unusable (no id; null, list, object, number, boolean, empty, 100,000-character and "
        "URL-breaking ids; a string, a number and a list as element; a repeated id) and "
        f"jobs without an object input; then a repeat across batches and {len(BODIES)} "
        "whole bodies (a number, a string, true, null, an object of jobs, single jobs "
        "without id or input)",
        "ready (stand-in)",
        f"every job with a usable id answered exactly once ({len(expected)}; those without "
        f"an object input with invalid_request_error); {dropped} elements logged and dropped; "
        "the loop kept taking jobs; exit 0 on SIGTERM",
    )


def test_a_failing_job_take_backs_off_and_warns(tmp_path):
    failures = 4
    with QueueServer() as queue:
        proc = _ready_worker(queue, tmp_path)
        try:
            queue.fail_next(failures, 500, kinds=["job-take", "job-take-batch"])
            failed = lambda: sum(h.outcome == 500 for h in queue.hits())  # noqa: E731
            queue.wait_for(lambda: failed() == failures, DEADLINE, "the failed job-takes")
            job = queue.submit(OK)
            assert _kind(queue.wait_done(job, DEADLINE)) == "ok"
        finally:
            assert _stop(proc) == 0
    takes = [h for h in queue.hits() if h.kind in ("job-take", "job-take-batch")]
    first_failed = next(i for i, h in enumerate(takes) if h.outcome == 500)
    spaced = takes[first_failed : first_failed + failures + 1]
    assert [h.outcome == 500 for h in spaced] == [True] * failures + [False]
    gaps = [b.at - a.at for a, b in itertools.pairwise(spaced)]
    expected = [intake.BACKOFF_FIRST_S * 2**n for n in range(failures)]
    assert all(gap >= wait * 0.9 for gap, wait in zip(gaps, expected, strict=True)), gaps
    warned = [e for e in events(tmp_path) if e.get("event") == "job.take_failed"]
    assert [e["failures"] for e in warned] == list(range(1, failures + 1))
    assert {e["level"] for e in warned} == {"warning"}


def test_sigterm_with_a_held_job_take_exits_within_the_grace(tmp_path, reliability):
    grace = 3
    # The queue holds both polls open for 45 s: the worker must not wait for either.
    with QueueServer(hold_s=45, stop_hold_s=45) as queue:
        proc = _ready_worker(queue, tmp_path, VLLM_SHUTDOWN_GRACE=str(grace))
        try:
            queue.wait_for(lambda: queue.polls_held == 1, DEADLINE, "a job-take held open")
            sent = time.monotonic()
            os.killpg(proc.pid, signal.SIGTERM)
            code = proc.wait(DEADLINE)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(DEADLINE)
        queue.wait_for(lambda: queue.polls_held == 0, DEADLINE, "the held job-take ended")
    assert code == 0
    assert took < grace, f"exit {took:.2f} s after SIGTERM"
    assert queue.hits("job-take-batch")[-1].outcome == "client gone"
    reliability(
        "SIGTERM while the queue holds a job-take (and a job-stop poll) open for 45 s; "
        f"VLLM_SHUTDOWN_GRACE={grace}",
        "stopped",
        f"both polls cancelled at once; worker exit 0 after {took:.1f} s",
    )
