"""Scale the model's output on one rank or all for k steps: a bad batch, a loss spike."""

from __future__ import annotations

from pydantic import Field

from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import Command


class LossSpikeConfig(InStepConfig):
    factor: float = Field(default=1000.0, gt=0, le=1e30)
    """How many times larger the model's output (every floating tensor of it) is: the loss and its gradients grow with it."""


class LossSpike(InStepFault, kind="loss-spike"):
    """Scale the model's output on one rank or all for k steps: a bad batch, a loss spike."""

    Config = LossSpikeConfig
    named_by = ("nonfinite", "loss_spike")

    def command(self) -> Command:
        c: LossSpikeConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where="loss", ranks=self._ranks(), steps=c.steps,
                       params={"value": c.factor})
