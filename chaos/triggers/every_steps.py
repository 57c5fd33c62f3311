"""``every_steps``: fire each time training crosses another multiple of N steps."""

from __future__ import annotations

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class EveryStepsParams(TriggerParams):
    every_steps: int = Field(ge=1, le=10_000_000)
    """Fire at steps N, 2N, 3N, ... (each multiple once, even if a restart replays it)."""


class EverySteps(Trigger, kind="every_steps"):
    """Fire each time training crosses another multiple of N steps."""

    Params = EveryStepsParams
    shorthand = "every_steps"
    repeating = True

    def __init__(self, params: EveryStepsParams) -> None:
        super().__init__(params)
        self._next = params.every_steps

    def __call__(self, state: TriggerState) -> bool:
        if state.step >= self._next:
            while self._next <= state.step:
                self._next += self.params.every_steps
            return True
        return False
