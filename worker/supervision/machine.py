"""The worker's lifecycle as data: states, the transition table, and the model.

    starting ──output/disk──▶ downloading ◀──▶ loading ──/health 200──▶ ready
        │                          │              │                      │
        └──────────────┬───────────┴──────────────┘                      │
                       ▼                                                 ▼
          failed-permanent | failed-transient ◀──────── vLLM died ───────┘
    any state ──SIGTERM──▶ stopped
    starting | downloading | loading ──relaunch──▶ starting   (worker.supervision.relaunch:
        a failure a relaunch with what vLLM measured can fix; at most two, never settled)

The model calls an injected ``Effects`` object for everything outside itself
(logging, killing vLLM, waking waiters), so the machine is tested without processes.
``auto_transitions`` is off and an invalid trigger raises ``MachineError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from transitions import EventData, Machine

from diagnostics import Diagnosis, State

# The worker's states are diagnostics.State: the classifier's phases plus ``stopped``.
WorkerState = State
S = State
_STARTING = [S.STARTING, S.DOWNLOADING, S.LOADING]
SETTLED = frozenset({S.READY, S.FAILED_PERMANENT, S.FAILED_TRANSIENT, S.STOPPED})

TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "download_started", "source": [S.STARTING, S.LOADING], "dest": S.DOWNLOADING},
    {"trigger": "loading_started", "source": [S.STARTING, S.DOWNLOADING], "dest": S.LOADING},
    {"trigger": "became_ready", "source": _STARTING, "dest": S.READY},
    {"trigger": "failed_permanently", "source": _STARTING, "dest": S.FAILED_PERMANENT},
    {"trigger": "failed_transiently", "source": [*_STARTING, S.READY], "dest": S.FAILED_TRANSIENT},
    {"trigger": "stop", "source": [*_STARTING, S.READY], "dest": S.STOPPED},
    # A failed start that a relaunch can fix (worker.supervision.relaunch): vLLM is
    # started again in this container; the failure is never settled on.
    {"trigger": "relaunch", "source": _STARTING, "dest": S.STARTING},
]


class Effects(Protocol):
    """What the lifecycle does to the world when it changes state."""

    def state_changed(self, source: State, dest: State) -> None: ...

    def failed(self, state: State, diagnosis: Diagnosis) -> None: ...

    def ready(self) -> None: ...


class Lifecycle:
    """The model the machine drives. ``state`` is the only lifecycle flag there is."""

    state: State
    if TYPE_CHECKING:  # added by transitions.Machine, one method per trigger

        def download_started(self) -> bool: ...
        def loading_started(self) -> bool: ...
        def became_ready(self) -> bool: ...
        def failed_permanently(self) -> bool: ...
        def failed_transiently(self) -> bool: ...
        def stop(self) -> bool: ...
        def relaunch(self) -> bool: ...

    def __init__(self, effects: Effects):
        self.effects = effects
        self.diagnosis: Diagnosis | None = None
        self.machine = Machine(
            model=self,
            states=State,
            transitions=TRANSITIONS,
            initial=S.STARTING,
            auto_transitions=False,
            ignore_invalid_triggers=False,
            after_state_change="_after_change",
            send_event=True,
        )

    def fail(self, diagnosis: Diagnosis) -> None:
        """Enter the failed state the diagnosis calls for (failed-transient after ready:
        a worker that served once is restarted, whatever the cause)."""
        self.diagnosis = diagnosis
        if diagnosis.permanent and self.state is not S.READY:
            self.failed_permanently()
        else:
            self.failed_transiently()

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    def _after_change(self, event: EventData) -> None:
        name = event.transition.source if event.transition else self.state.name
        source = name if isinstance(name, State) else State[name]  # transitions: the name
        self.effects.state_changed(source, self.state)
        if self.state is S.READY:
            self.effects.ready()
        elif self.state in (S.FAILED_PERMANENT, S.FAILED_TRANSIENT):
            assert self.diagnosis is not None
            self.effects.failed(self.state, self.diagnosis)


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
