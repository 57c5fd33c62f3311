"""``on_event``: fire when the workload emits a matching protocol event (e.g. ``ckpt_begin``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState

EventName = Literal["start", "step", "ckpt_staged", "ckpt_begin", "ckpt_durable", "ckpt_commit", "ckpt_error", "ckpt_load",
                    "ckpt_reject", "health", "final"]


class OnEventParams(TriggerParams):
    on_event: EventName
    """The event name to match (a record's ``ev``)."""
    step: int | None = Field(default=None, ge=0)
    """Only an event with this ``step`` field."""
    rank: int | None = Field(default=None, ge=0)
    """Only an event from this rank (events many ranks emit otherwise count once per step)."""
    nth: int = Field(default=1, ge=1)
    """Fire on the n-th matching occurrence (counted once per attempt and step)."""


class OnEvent(Trigger, kind="on_event"):
    """Fire when the workload emits a matching protocol event (e.g. ``ckpt_begin``)."""

    Params = OnEventParams
    shorthand = "on_event"

    def __init__(self, params: OnEventParams) -> None:
        super().__init__(params)
        self._seen: set[tuple[str, object]] = set()
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        if self._fired:
            return False
        p = self.params
        for rec in state.new_events:
            if rec.get("ev") != p.on_event:
                continue
            if p.step is not None and rec.get("step") != p.step:
                continue
            if p.rank is not None and rec.get("rank") != p.rank:
                continue
            # The same checkpoint announced by every rank is one occurrence, not world_size of them.
            self._seen.add((str(rec.get("attempt")), rec.get("step", rec.get("path"))))
            if len(self._seen) >= p.nth:
                self._fired = True
                return True
        return False
