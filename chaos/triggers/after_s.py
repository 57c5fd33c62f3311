"""``after_s``: fire once, N seconds after the workload was launched."""

from __future__ import annotations

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class AfterSParams(TriggerParams):
    after_s: float = Field(ge=0, le=7 * 24 * 3600)
    """Seconds after launch."""


class AfterS(Trigger, kind="after_s"):
    """Fire once, N seconds after the workload was launched."""

    Params = AfterSParams
    shorthand = "after_s"

    def __init__(self, params: AfterSParams) -> None:
        super().__init__(params)
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        if not self._fired and state.now >= self.params.after_s:
            self._fired = True
            return True
        return False
