"""``at_step``: fire once, when any rank first reports optimizer step N."""

from __future__ import annotations

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class AtStepParams(TriggerParams):
    at_step: int = Field(ge=1, le=10_000_000)
    """Fire when the highest step reported by any rank reaches this value."""


class AtStep(Trigger, kind="at_step"):
    """Fire once, when any rank first reports optimizer step N."""

    Params = AtStepParams
    shorthand = "at_step"

    def __init__(self, params: AtStepParams) -> None:
        super().__init__(params)
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        if not self._fired and state.step >= self.params.at_step:
            self._fired = True
            return True
        return False
