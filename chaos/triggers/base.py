"""Triggers: when a fault fires. Tiny stateful predicates over the run's progress, combinable with ``|`` and ``&``.

Like tenacity's stop/wait strategies: each kind is a small class with one ``__call__``, plain
functions are accepted wherever a trigger is, and time comes from the caller (tests never sleep).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar



from chaos.spec.configs import StrictConfig
from chaos.evidence.events import Record
from chaos.registry import TRIGGERS, Plugin


@dataclass
class TriggerState:
    """What a trigger sees at each poll of the runner."""

    now: float
    """Seconds since the workload was launched (the runner's clock, injectable)."""
    step: int = 0
    """Highest optimizer step any rank has reported so far, over all attempts."""
    new_events: list[Record] = field(default_factory=list)
    """Workload records that arrived since the previous poll."""
    rng: random.Random = field(default_factory=random.Random)
    """The experiment's seeded RNG."""
    last_inject: float | None = None
    """Seconds since launch of the latest injection of any fault (None before the first)."""
    last_inject_t: float | None = None
    """The same injection on the wall clock of the workload's records (their ``t``), so a trigger can tell a record
    stamped after it from one stamped before it and read late (None before the first)."""
    ckpt_dir: Path | None = None
    """The run's checkpoint directory, for triggers that watch what the workload leaves on disk."""


class TriggerParams(StrictConfig):
    """Parameters of one trigger kind. ``shorthand`` names the field a bare scalar fills."""


class Trigger(Plugin):
    """Base class: subclass with ``kind=`` to register; ``__call__`` returns True when it fires."""

    registry = TRIGGERS
    Params: ClassVar[type[TriggerParams]] = TriggerParams
    shorthand: ClassVar[str | None] = None
    repeating: ClassVar[bool] = False
    """A repeating trigger may fire many times; the others fire at most once."""
    before_launch: ClassVar[bool] = False
    """Polled once before the workload starts (``before_launch``); the others only once it runs."""

    def __init__(self, params: TriggerParams | None = None) -> None:
        self.params = params if params is not None else self.Params()

    def __call__(self, state: TriggerState) -> bool:
        raise NotImplementedError

    def __or__(self, other: "Trigger | Callable[[TriggerState], bool]") -> "Trigger":
        return _AnyOf([self, as_trigger(other)])

    def __and__(self, other: "Trigger | Callable[[TriggerState], bool]") -> "Trigger":
        return _AllOf([self, as_trigger(other)])

    def describe(self) -> str:
        value = self.params.model_dump(exclude_defaults=True)
        if self.shorthand and list(value) == [self.shorthand]:
            value = value[self.shorthand]
        return f"{self.kind}={value}"


class _Fn(Trigger):
    def __init__(self, fn: Callable[[TriggerState], bool]) -> None:
        super().__init__()
        self.fn = fn

    def __call__(self, state: TriggerState) -> bool:
        return bool(self.fn(state))

    def describe(self) -> str:
        return getattr(self.fn, "__name__", "fn")


def as_trigger(obj: "Trigger | Callable[[TriggerState], bool]") -> Trigger:
    return obj if isinstance(obj, Trigger) else _Fn(obj)


class _AnyOf(Trigger):
    def __init__(self, parts: list[Trigger]) -> None:
        super().__init__()
        self.parts = parts
        self.repeating = any(p.repeating for p in parts)

    def __call__(self, state: TriggerState) -> bool:
        # Evaluate every part (not short-circuit) so each sees every poll and keeps its state right.
        results = [p(state) for p in self.parts]
        return any(results)

    def describe(self) -> str:
        return " | ".join(p.describe() for p in self.parts)


class _AllOf(Trigger):
    """Fires once every part has fired (each part latched when it first fires)."""

    def __init__(self, parts: list[Trigger]) -> None:
        super().__init__()
        self.parts = parts
        self._seen = [False] * len(parts)

    def __call__(self, state: TriggerState) -> bool:
        for i, part in enumerate(self.parts):
            if part(state):
                self._seen[i] = True
        if all(self._seen):
            self._seen = [False] * len(self.parts)
            return True
        return False

    def describe(self) -> str:
        return " & ".join(p.describe() for p in self.parts)


def any_of(*parts: Trigger) -> Trigger:
    return _AnyOf([as_trigger(p) for p in parts])


def all_of(*parts: Trigger) -> Trigger:
    return _AllOf([as_trigger(p) for p in parts])
