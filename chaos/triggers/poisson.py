"""``poisson``: fire at seeded random times, a Poisson process with a mean interval (game days)."""

from __future__ import annotations

from pydantic import Field

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class PoissonParams(TriggerParams):
    mean_interval_s: float = Field(gt=0, le=7 * 24 * 3600)
    """Mean seconds between firings; intervals are exponential, drawn from the experiment's seed."""
    start_after_s: float = Field(default=0.0, ge=0)
    """No firing before this many seconds after launch."""


class Poisson(Trigger, kind="poisson"):
    """Fire at seeded random times, a Poisson process with a mean interval (game days)."""

    Params = PoissonParams
    shorthand = "mean_interval_s"
    repeating = True

    def __init__(self, params: PoissonParams) -> None:
        super().__init__(params)
        self._next: float | None = None

    def __call__(self, state: TriggerState) -> bool:
        if self._next is None:
            self._next = self.params.start_after_s + state.rng.expovariate(1 / self.params.mean_interval_s)
        if state.now >= self._next:
            self._next = state.now + state.rng.expovariate(1 / self.params.mean_interval_s)
            return True
        return False
