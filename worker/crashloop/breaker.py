"""The crash-loop breaker: a restart ledger on the persistent volume.

Each failed-transient start is recorded under a key derived from the launch
configuration (command and vLLM arguments; secrets dropped before hashing). When a
configuration has already failed ``limit`` times within ``window_s``, the next failure
is judged permanent instead: the worker stays up and tells every job how often and
why it failed and how to reset. A start that reaches ready clears the record.

Several workers may share the ledger (one network volume): each read-modify-write
holds a lock file beside it (``filelock``; waited for at most ``LOCK_TIMEOUT_S``), and
writes are atomic (temp file + rename), so no failure is lost and no reader sees half a
file. A corrupt, unwritable or locked-up ledger, or an entry of the wrong shape
(``"at": "yesterday"``, null, a non-text category), is logged and ignored: the breaker
must never be the reason a worker fails or never settles.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import structlog
from filelock import FileLock, Timeout

from diagnostics import Diagnosis, State
from diagnostics.redaction.secrets import without_secret_args

log = structlog.get_logger("worker.breaker")

LEDGER_NAME = ".vllm-worker/restart-ledger.json"
LOCK_TIMEOUT_S = 10.0
_MAX_LEDGER_BYTES = 1 << 20  # a ledger larger than this is not ours: ignored


def config_key(command: Sequence[str], args: Sequence[str]) -> str:
    """A stable hash of what decides how vLLM starts; never includes a secret
    (secret flags and their values, URL credentials: :mod:`diagnostics.redaction.secrets`)."""
    kept = without_secret_args([*command, *args])
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:16]


def valid_entry(entry: object) -> bool:
    """An entry the breaker can use: ``{"at": finite number, "category": text}``."""
    if not isinstance(entry, dict):
        return False
    at, category = entry.get("at"), entry.get("category", "other")
    return (
        isinstance(at, int | float)
        and not isinstance(at, bool)
        and math.isfinite(at)
        and isinstance(category, str)
        and len(category) <= 64
    )


class RestartLedger:
    def __init__(self, path: Path | None, clock: Callable[[], float]):
        self.path = path
        self.clock = clock

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        """Hold the ledger's lock; yields False (and logs) when it cannot be had."""
        if self.path is None:
            yield False
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_S)
            lock.acquire()
        except Timeout as exc:
            log.warning("breaker.ledger_locked", path=str(self.path), error=str(exc))
            yield False
            return
        except OSError as exc:
            log.warning("breaker.ledger_unwritable", path=str(self.path), error=str(exc))
            yield False
            return
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                lock.release()

    def _load(self) -> dict:
        if self.path is None:
            return {}
        try:
            with self.path.open("rb") as handle:
                raw = handle.read(_MAX_LEDGER_BYTES + 1)
            if len(raw) > _MAX_LEDGER_BYTES:
                raise ValueError(f"larger than {_MAX_LEDGER_BYTES} bytes")
            data = json.loads(raw)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("breaker.ledger_unreadable", path=str(self.path), error=str(exc))
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict) -> None:
        if self.path is None:
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("breaker.ledger_unwritable", path=str(self.path), error=str(exc))

    def _recent(self, data: dict, key: str, window_s: float) -> list[dict]:
        now = self.clock()
        entries = data.get(key, [])
        if not isinstance(entries, list):
            return []
        usable = [e for e in entries if valid_entry(e)]
        if len(usable) < len(entries):
            log.warning("breaker.ledger_entries_ignored", count=len(entries) - len(usable))
        return [
            {"at": e["at"], "category": e.get("category", "other")}
            for e in usable
            if now - e["at"] <= window_s
        ]

    def recent(self, key: str, window_s: float) -> list[dict]:
        """The failures of ``key`` within the window (entries of the wrong shape skipped)."""
        try:
            return self._recent(self._load(), key, window_s)
        except Exception as exc:  # the breaker must never stop a worker from settling
            log.warning("breaker.ledger_failed", error=str(exc))
            return []

    def record(self, key: str, category: str, window_s: float) -> None:
        try:
            with self._locked() as locked:
                if not locked:
                    return
                data = self._load()
                entries = self._recent(data, key, window_s)
                entries.append({"at": self.clock(), "category": category})
                data[key] = entries
                self._save(data)
        except Exception as exc:
            log.warning("breaker.ledger_failed", error=str(exc))

    def clear(self, key: str) -> None:
        try:
            with self._locked() as locked:
                data = self._load() if locked else {}
                if key in data:
                    del data[key]
                    self._save(data)
        except Exception as exc:
            log.warning("breaker.ledger_failed", error=str(exc))


def judge(
    diagnosis: Diagnosis, history: list[dict], limit: int, window_s: float, ledger: str
) -> Diagnosis:
    """Pure: the diagnosis to act on, given the earlier failures of this configuration."""
    if diagnosis.permanent is not False or len(history) < limit:
        return diagnosis
    counts: dict[str, int] = {}
    for entry in [*history, {"category": str(diagnosis.category)}]:
        category = entry.get("category")
        category = category if isinstance(category, str) else "other"
        counts[category] = counts.get(category, 0) + 1
    seen = ", ".join(f"{n}x {c}" for c, n in sorted(counts.items()))
    minutes = window_s / 60
    return diagnosis._replace(
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
