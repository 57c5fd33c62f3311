"""``in_training``: fire once, at the first sign of training at or after N seconds (game days).

A game day draws its faults at random times; one that comes due while the job is restarting would
find no rank to kill, no collective to hang. Real faults do strike recovering jobs, but what a game
day measures is the cost of each fault on a training job, so the fault waits for the next optimizer
step and the wait is recorded (the fault record's ``due_s`` against its injection time).

On a drop-replica job (torchft) "training" is not enough: the survivors train on while a lost replica
group relaunches, and a fault that strikes then may take down the last group holding the state (or
leave the relaunch too little of the job to return to), which tests the box's start-up time rather
than the stack. With ``groups`` the fault also waits until every one of the job's replica groups has
committed a step stamped after the latest injection (a relaunched group: after its heal), up to
``groups_wait_s`` past its due time; it is never skipped, and ``delay`` says how long it waited and why.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_serializer

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class InTrainingParams(TriggerParams):
    after_s: float = Field(ge=0, le=7 * 24 * 3600)
    """Seconds after launch when the fault comes due; it fires with the first step reported from then on."""
    gap_s: float = Field(default=0.0, ge=0, le=3600)
    """And not within this many seconds of any other fault's injection: faults that came due together
    strike one after the other, each once the job trains again, so each one's cost is its own."""
    groups: int = Field(default=0, ge=0, le=100000)
    """A drop-replica job's replica groups (records with ``replica_group`` 0 .. groups-1): and not before each of
    them has committed a step stamped after the latest injection of any fault (0: do not wait for groups)."""
    groups_wait_s: float = Field(default=120.0, gt=0, le=24 * 3600)
    """The longest a fault waits past its due time for the groups; then it strikes anyway, and says which were away."""

    @model_serializer(mode="wrap")
    def _without_groups_unless_used(self, handler: Any) -> Any:
        # A fault that does not wait for groups is written (journal, dry run) as it was before the option existed.
        data = handler(self)
        if isinstance(data, dict) and not self.groups:
            data.pop("groups", None)
            data.pop("groups_wait_s", None)
        return data


class InTraining(Trigger, kind="in_training"):
    """Fire once, with the first optimizer step reported at or after N seconds after launch."""

    Params = InTrainingParams
    shorthand = "after_s"

    def __init__(self, params: InTrainingParams) -> None:
        super().__init__(params)
        self._fired = False
        self._stepped: dict[int, float] = {}
        """Per replica group, the latest ``t`` of a committed step it reported."""
        self._away: list[int] = []
        self.delay: dict[str, Any] | None = None
        """Once fired after waiting for replica groups: due_s, struck_s, waited_s and the reason."""

    def _note_groups(self, state: TriggerState) -> None:
        for r in state.new_events:
            g, t = r.get("replica_group"), r.get("t")
            if r.get("ev") == "step" and isinstance(g, int) and isinstance(t, (int, float)):
                self._stepped[g] = max(self._stepped.get(g, float("-inf")), float(t))

    def _groups_away(self, state: TriggerState) -> list[int]:
        since = state.last_inject_t if state.last_inject_t is not None else float("-inf")
        return [g for g in range(self.params.groups) if self._stepped.get(g, float("-inf")) <= since]

    def __call__(self, state: TriggerState) -> bool:
        if self.params.groups:
            self._note_groups(state)  # every poll: a group's step before the due time counts
        if self._fired or state.now < self.params.after_s:
            return False
        if state.last_inject is not None and state.now - state.last_inject < self.params.gap_s:
            return False
        if not any(r.get("ev") == "step" for r in state.new_events):
            return False
        if self.params.groups:
            away = self._groups_away(state)
            late = state.now - self.params.after_s
            if away and late < self.params.groups_wait_s:
                self._away = sorted(set(self._away) | set(away))
                return False
            if away:
                reason = (f"waited the longest groups_wait_s {self.params.groups_wait_s:g} s; "
                          f"{', '.join(f'rg{g}' for g in away)} had still committed no step since the latest fault")
            elif self._away:
                reason = (f"{', '.join(f'rg{g}' for g in self._away)} had committed no step since the latest fault "
                          f"(still coming back from it) when it came due; it struck once every group had")
            else:
                reason = None
            if reason is not None:
                self.delay = {"due_s": self.params.after_s, "struck_s": round(state.now, 3),
                              "waited_s": round(late, 3), "away": [f"rg{g}" for g in (away or self._away)],
                              "reason": reason}
        self._fired = True
        return True
