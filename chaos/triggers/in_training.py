"""``in_training``: fire once, at the first sign of training at or after N seconds (game days).

A game day draws its faults at random times; one that comes due while the job is restarting would
find no rank to kill, no collective to hang. Real faults do strike recovering jobs, but what a game
day measures is the cost of each fault on a training job, so the fault waits for the next optimizer
step and the wait is recorded (the fault record's ``due_s`` against its injection time).
"""

from __future__ import annotations

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class InTrainingParams(TriggerParams):
    after_s: float = Field(ge=0, le=7 * 24 * 3600)
    """Seconds after launch when the fault comes due; it fires with the first step reported from then on."""
    gap_s: float = Field(default=0.0, ge=0, le=3600)
    """And not within this many seconds of any other fault's injection: faults that came due together
    strike one after the other, each once the job trains again, so each one's cost is its own."""


class InTraining(Trigger, kind="in_training"):
    """Fire once, with the first optimizer step reported at or after N seconds after launch."""

    Params = InTrainingParams
    shorthand = "after_s"

    def __init__(self, params: InTrainingParams) -> None:
        super().__init__(params)
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        if self._fired or state.now < self.params.after_s:
            return False
        if state.last_inject is not None and state.now - state.last_inject < self.params.gap_s:
            return False
        if any(r.get("ev") == "step" for r in state.new_events):
            self._fired = True
            return True
        return False
