"""The crash-loop breaker counts each relaunch in the container as a failed start of the
configuration, and allows no relaunch once the ledger holds CRASH_LOOP_LIMIT of them."""

from __future__ import annotations

from pathlib import Path

from diagnostics import Category, Diagnosis, State
from worker.config.settings import load_settings
from worker.crashloop.crash_loop import CrashLoopBreaker


def _breaker(tmp_path: Path, **extra: str) -> CrashLoopBreaker:
    volume = tmp_path / "volume"
    volume.mkdir(exist_ok=True)
    env = {"MODEL_NAME": "org/model", "BASE_PATH": str(volume), **extra}
    return CrashLoopBreaker(load_settings(env))


def test_relaunches_are_counted_and_a_full_ledger_allows_none(tmp_path: Path) -> None:
    breaker = _breaker(tmp_path, CRASH_LOOP_LIMIT="3")
    assert breaker.allows_relaunch()
    breaker.relaunched("relax")
    breaker.relaunched("compile_cache")
    assert breaker.allows_relaunch()
    history = breaker.ledger.recent(breaker.key, 1800)
    assert [e["category"] for e in history] == ["relaunch:relax", "relaunch:compile_cache"]
    transient = Diagnosis(State.FAILED_TRANSIENT, Category.OTHER, "engine-wrapper")
    assert breaker.judge(transient).state is State.FAILED_TRANSIENT  # the third entry
    assert not breaker.allows_relaunch()
    assert breaker.judge(transient).rule == "crash-loop-breaker"  # the fourth trips it


def test_a_start_that_reaches_ready_forgets_its_relaunches(tmp_path: Path) -> None:
    breaker = _breaker(tmp_path, CRASH_LOOP_LIMIT="1")
    breaker.relaunched("revision")
    assert not breaker.allows_relaunch()
    breaker.cleared()
    assert breaker.allows_relaunch()
