"""The crash-loop breaker: a restart ledger on the persistent volume.

Each failed-transient start is recorded under a key derived from the launch
configuration (command and vLLM arguments; secrets dropped before hashing). When a
configuration has already failed ``limit`` times within ``window_s``, the next failure
is judged permanent instead: the worker stays up and tells every job how often and
why it failed and how to reset. A start that reaches ready clears the record.

Writes are atomic (temp file + rename). A corrupt or unwritable ledger is logged and
ignored: the breaker must never be the reason a worker fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import structlog

from diagnostics import Diagnosis, State

log = structlog.get_logger("worker.breaker")

LEDGER_NAME = ".vllm-worker/restart-ledger.json"
_SECRET_FLAGS = ("--hf-token", "--api-key")


def config_key(command: Sequence[str], args: Sequence[str]) -> str:
    """A stable hash of what decides how vLLM starts; never includes a token."""
    kept: list[str] = []
    skip = False
    for arg in [*command, *args]:
        if skip:
            skip = False
            continue
        if arg in _SECRET_FLAGS:
            skip = True
            continue
        if arg.startswith(tuple(f + "=" for f in _SECRET_FLAGS)) or "hf_" in arg:
            continue
        kept.append(arg)
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:16]


class RestartLedger:
    def __init__(self, path: Path | None, clock: Callable[[], float]):
        self.path = path
        self.clock = clock

    def _load(self) -> dict:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("breaker.ledger_unreadable", path=str(self.path), error=str(exc))
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("breaker.ledger_unwritable", path=str(self.path), error=str(exc))

    def recent(self, key: str, window_s: float) -> list[dict]:
        now = self.clock()
        entries = self._load().get(key, [])
        if not isinstance(entries, list):
            return []
        return [
            e for e in entries if isinstance(e, dict) and now - float(e.get("at", 0)) <= window_s
        ]

    def record(self, key: str, category: str, window_s: float) -> None:
        data = self._load()
        entries = self.recent(key, window_s)
        entries.append({"at": self.clock(), "category": category})
        data[key] = entries
        self._save(data)

    def clear(self, key: str) -> None:
        data = self._load()
        if key in data:
            del data[key]
            self._save(data)


def judge(
    diagnosis: Diagnosis, history: list[dict], limit: int, window_s: float, ledger: str
) -> Diagnosis:
    """Pure: the diagnosis to act on, given the earlier failures of this configuration."""
    if diagnosis.permanent is not False or len(history) < limit:
        return diagnosis
    counts: dict[str, int] = {}
    for entry in [*history, {"category": str(diagnosis.category)}]:
        counts[entry.get("category", "other")] = counts.get(entry.get("category", "other"), 0) + 1
    seen = ", ".join(f"{n}x {c}" for c, n in sorted(counts.items()))
    minutes = window_s / 60
    return replace(
        diagnosis,
        state=State.FAILED_PERMANENT,
        rule="crash-loop-breaker",
        cause=(
            f"vLLM failed to start {len(history) + 1} times in {minutes:g} minutes with this "
            f"configuration ({seen}); the worker stops retrying. Last failure: {diagnosis.message}"
        ),
        fix=(
            "Fix the cause above, or, to retry the same configuration, set CRASH_LOOP_RESET=true "
            f"for one start or delete {ledger}."
        ),
    )
