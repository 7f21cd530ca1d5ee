"""The worker's lifecycle as data: states, the transition table, and the model.

    starting ──output/disk──▶ downloading ◀──▶ loading ──/health 200──▶ ready
        │                          │              │                      │
        └──────────────┬───────────┴──────────────┘                      │
                       ▼                                                 ▼
          failed-permanent | failed-transient ◀──────── vLLM died ───────┘
    any state ──SIGTERM──▶ stopped

The model calls an injected ``Effects`` object for everything outside itself
(logging, killing vLLM, waking waiters), so the machine is tested without processes.
``auto_transitions`` is off and an invalid trigger raises ``MachineError``.
"""

from __future__ import annotations

import enum
from typing import Protocol

from transitions import Machine

from diagnostics import Diagnosis


class WorkerState(enum.Enum):
    STARTING = "starting"
    DOWNLOADING = "downloading"
    LOADING = "loading"
    READY = "ready"
    FAILED_PERMANENT = "failed-permanent"
    FAILED_TRANSIENT = "failed-transient"
    STOPPED = "stopped"


S = WorkerState
_STARTING = [S.STARTING, S.DOWNLOADING, S.LOADING]
SETTLED = frozenset({S.READY, S.FAILED_PERMANENT, S.FAILED_TRANSIENT, S.STOPPED})

TRANSITIONS = [
    {"trigger": "download_started", "source": [S.STARTING, S.LOADING], "dest": S.DOWNLOADING},
    {"trigger": "loading_started", "source": [S.STARTING, S.DOWNLOADING], "dest": S.LOADING},
    {"trigger": "became_ready", "source": _STARTING, "dest": S.READY},
    {"trigger": "failed_permanently", "source": _STARTING, "dest": S.FAILED_PERMANENT},
    {"trigger": "failed_transiently", "source": [*_STARTING, S.READY], "dest": S.FAILED_TRANSIENT},
    {"trigger": "stop", "source": [*_STARTING, S.READY], "dest": S.STOPPED},
]


class Effects(Protocol):
    """What the lifecycle does to the world when it changes state."""

    def state_changed(self, source: WorkerState, dest: WorkerState) -> None: ...

    def failed(self, diagnosis: Diagnosis) -> None: ...

    def ready(self) -> None: ...


class Lifecycle:
    """The model the machine drives. ``state`` is the only lifecycle flag there is."""

    state: WorkerState

    def __init__(self, effects: Effects):
        self.effects = effects
        self.diagnosis: Diagnosis | None = None
        self.machine = Machine(
            model=self,
            states=WorkerState,
            transitions=TRANSITIONS,
            initial=S.STARTING,
            auto_transitions=False,
            ignore_invalid_triggers=False,
            after_state_change="_after_change",
            send_event=True,
        )

    def fail(self, diagnosis: Diagnosis) -> None:
        """Enter the failed state the diagnosis calls for."""
        self.diagnosis = diagnosis
        if diagnosis.permanent:
            self.failed_permanently()
        else:
            self.failed_transiently()

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    def _after_change(self, event) -> None:
        source = event.transition.source
        self.effects.state_changed(S[source] if isinstance(source, str) else source, self.state)
        if self.state is S.READY:
            self.effects.ready()
        elif self.state in (S.FAILED_PERMANENT, S.FAILED_TRANSIENT):
            assert self.diagnosis is not None
            self.effects.failed(self.diagnosis)


def mermaid() -> str:
    """The machine as a Mermaid state diagram, generated from TRANSITIONS."""
    lines = ["stateDiagram-v2", "  direction LR", f"  [*] --> {S.STARTING.name}"]
    for row in TRANSITIONS:
        sources = row["source"] if isinstance(row["source"], list) else [row["source"]]
        for source in sources:
            lines.append(f"  {source.name} --> {row['dest'].name}: {row['trigger']}")
    for state in (S.FAILED_PERMANENT, S.FAILED_TRANSIENT, S.STOPPED):
        lines.append(f"  {state.name} --> [*]")
    return "\n".join(lines) + "\n"
