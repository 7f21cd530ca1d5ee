"""The values the diagnostics core produces: states, categories, evidence, diagnoses.

Evidence and Diagnosis are named tuples (``diagnosis._replace(rule=...)``), not
dataclasses: importing :mod:`dataclasses` (it imports :mod:`inspect`) and generating a
dataclass's methods cost ``diagnose`` ~8 ms of a small log's ~60 ms run."""

# Annotations are evaluated (no `from __future__ import annotations`): typing compiles each
# string annotation of a named tuple's fields at import, ~0.1 ms a class of a small log's run.
import enum
from typing import NamedTuple


class State(enum.StrEnum):
    """How far a vLLM start got, as read from its output; also the worker's lifecycle
    states (``worker.supervision.machine``), which add ``stopped`` (a requested stop,
    never read from output)."""

    STARTING = "starting"
    DOWNLOADING = "downloading"
    LOADING = "loading"
    READY = "ready"
    FAILED_PERMANENT = "failed-permanent"
    FAILED_TRANSIENT = "failed-transient"
    STOPPED = "stopped"


class Category(enum.StrEnum):
    """Why a start failed. Each category is either permanent or transient."""

    OOM = "oom"
    KV_CACHE = "kv_cache"
    GATED_MODEL = "gated_model"
    REMOTE_CODE = "remote_code"
    BAD_CONFIG = "bad_config"
    MODEL_REQUIREMENT = "model_requirement"
    MODEL_NOT_FOUND = "model_not_found"
    CUDA_FAULT = "cuda_fault"
    NETWORK = "network"
    OTHER = "other"

    @property
    def permanent(self) -> bool:
        """A permanent failure fails the same way on every restart of the same configuration."""
        return self not in _TRANSIENT


_TRANSIENT = frozenset({Category.CUDA_FAULT, Category.NETWORK, Category.OTHER})


class Evidence(NamedTuple):
    """The line that shows the cause: 1-based line number in the raw input, and its text."""

    line: int
    text: str


class Diagnosis(NamedTuple):
    """What a start reached and, when it failed, why and what to change.

    ``category``, ``rule``, ``evidence``, ``cause`` and ``fix`` are None unless the
    state is one of the failed states.
    """

    state: State
    category: Category | None = None
    rule: str | None = None
    evidence: Evidence | None = None
    cause: str | None = None
    fix: str | None = None

    @property
    def failed(self) -> bool:
        return self.state in (State.FAILED_PERMANENT, State.FAILED_TRANSIENT)

    @property
    def permanent(self) -> bool | None:
        """True/False for a failed start; None while it has not failed.

        Follows the state, which the category decides unless something above the
        classifier (the worker's crash-loop breaker) judged otherwise.
        """
        return self.state is State.FAILED_PERMANENT if self.failed else None

    @property
    def label(self) -> str | None:
        """The outcome in the corpus's names: "ok" for a start that reached ready, else the
        category; None while a start is still under way."""
        if self.state is State.READY:
            return "ok"
        return str(self.category) if self.category else None

    @property
    def message(self) -> str | None:
        """Cause and fix in one paragraph: what a job receives."""
        if not self.failed:
            return None
        parts = [p.strip() for p in (self.cause, self.fix) if p and p.strip()]
        return " ".join(parts)

    def to_dict(self) -> dict:
        data = self._asdict()
        data["evidence"] = self.evidence._asdict() if self.evidence is not None else None
        data["state"] = str(self.state)
        data["category"] = self.label
        data["permanent"] = self.permanent
        data["message"] = self.message
        return data


def failed_state(category: Category) -> State:
    return State.FAILED_PERMANENT if category.permanent else State.FAILED_TRANSIENT
