"""worker.supervision.watchdog: pure; the clock readings are plain numbers here."""

from __future__ import annotations

from diagnostics import Category, Classifier, State
from tests.support.packs import shipped_pack
from worker.supervision.watchdog import Watchdog

PACK = shipped_pack()
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.25 GiB of which 1.12 GiB is free."
)


def _watchdog(startup: float = 100.0, stall: float = 10.0, linger: float = 5.0) -> Watchdog:
    return Watchdog(Classifier(PACK), 1000.0, startup, stall, linger)


def test_nothing_to_say_while_within_every_limit() -> None:
    watchdog = _watchdog()
    watchdog.activity(1009.0)
    assert watchdog.check(1010.0, State.LOADING) is None


def test_stall_counts_from_the_last_activity() -> None:
    watchdog = _watchdog(stall=10.0)
    watchdog.activity(1005.0)
    assert watchdog.check(1015.0, State.LOADING) is None
    verdict = watchdog.check(1015.5, State.LOADING)
    assert verdict is not None
    assert (verdict.state, verdict.category, verdict.rule) == (
        State.FAILED_TRANSIENT,
        Category.OTHER,
        "startup-timeout",
    )
    assert "stalled while loading" in str(verdict.cause)


def test_the_startup_limit_counts_from_the_start_whatever_the_activity() -> None:
    watchdog = _watchdog(startup=100.0, stall=10.0)
    watchdog.activity(1100.5)
    verdict = watchdog.check(1100.5, State.DOWNLOADING)
    assert verdict is not None and "VLLM_STARTUP_TIMEOUT=100" in str(verdict.cause)
    assert "it was downloading" in str(verdict.cause)


def test_after_a_fatal_line_the_outputs_diagnosis_comes_once_the_wait_is_over() -> None:
    watchdog = _watchdog(linger=5.0)
    watchdog.classifier.feed(OOM)
    watchdog.fatal_seen(1001.0)
    watchdog.fatal_seen(1004.0)  # the wait starts at the first fatal line
    assert watchdog.check(1006.0, State.LOADING) is None
    verdict = watchdog.check(1006.5, State.LOADING)
    assert verdict is not None and verdict.category is Category.OOM


def test_a_timeout_points_at_the_last_line_seen() -> None:
    watchdog = _watchdog(stall=1.0)
    watchdog.classifier.feed("INFO Starting to load model org/m")
    verdict = watchdog.check(1002.0, State.LOADING)
    assert verdict is not None and verdict.evidence is not None
    assert verdict.evidence.text == "INFO Starting to load model org/m"
