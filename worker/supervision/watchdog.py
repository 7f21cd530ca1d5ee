"""The watchdog: whether a start that has not settled must be given up, as of ``now``.

Pure: the caller passes the clock readings (``activity``, ``fatal_seen``, ``check``) and
the state; the classifier supplies the evidence. Three limits:

* a fatal line was seen and vLLM has not exited ``linger_s`` later: the diagnosis the
  output gives (vLLM sometimes hangs after its fatal error);
* ``VLLM_STARTUP_TIMEOUT`` since the start;
* ``VLLM_STALL_TIMEOUT`` without output or download progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnostics import Category, Classifier, Diagnosis, State

LINGER_AFTER_FATAL_S = 20.0


@dataclass
class Watchdog:
    classifier: Classifier
    started: float
    startup_timeout_s: float
    stall_timeout_s: float
    linger_s: float = LINGER_AFTER_FATAL_S
    last_activity: float = field(init=False)
    fatal_seen_at: float | None = None

    def __post_init__(self) -> None:
        self.last_activity = self.started

    def activity(self, now: float) -> None:
        """Output or download progress: vLLM is not stalled."""
        self.last_activity = now

    def fatal_seen(self, now: float) -> None:
        """The output showed a fatal error; the wait for vLLM's exit starts (once)."""
        if self.fatal_seen_at is None:
            self.fatal_seen_at = now

    def check(self, now: float, state: State) -> Diagnosis | None:
        """The failure to settle in, or None while the start may go on."""
        if self.fatal_seen_at is not None and now - self.fatal_seen_at > self.linger_s:
            return self.classifier.diagnosis(exited=True)
        if now - self.started > self.startup_timeout_s:
            return self._timeout(
                f"vLLM did not become ready within VLLM_STARTUP_TIMEOUT="
                f"{self.startup_timeout_s:g} s (it was {state.value})"
            )
        if now - self.last_activity > self.stall_timeout_s:
            return self._timeout(
                f"vLLM stalled while {state.value}: no output and no download progress for "
                f"VLLM_STALL_TIMEOUT={self.stall_timeout_s:g} s"
            )
        return None

    def _timeout(self, cause: str) -> Diagnosis:
        return Diagnosis(
            state=State.FAILED_TRANSIENT,
            category=Category.OTHER,
            rule="startup-timeout",
            evidence=self.classifier.diagnosis(exited=True).evidence,
            cause=cause + ".",
            fix="A restart may help. For very large models raise VLLM_STARTUP_TIMEOUT / "
            "VLLM_STALL_TIMEOUT, or attach a network volume so the download is not repeated.",
        )
