"""Put a NaN or an Inf into the loss, the gradients or a parameter of one rank or all, inside the training step."""

from __future__ import annotations

from typing import Literal

from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import Command


class NanConfig(InStepConfig):
    where: Literal["loss", "grad", "param"] = "loss"
    """loss: the model's output (so the loss and every gradient); grad: one parameter's gradient as backward
    computes it, before the all-reduce (a NaN on one rank reaches every rank through the average); param:
    one element of a parameter, written between two steps (the rank's replica alone)."""
    value: Literal["nan", "inf", "-inf"] = "nan"
    """What is written."""
    tensor: int = 0
    """grad and param: which parameter, by its position in the optimizer's parameter groups."""
    element: int = 0
    """param: which element of it (flattened; taken modulo its size)."""


class Nan(InStepFault, kind="nan"):
    """Put a NaN or an Inf into the loss, the gradients or a parameter of one rank or all, inside the training step."""

    Config = NanConfig
    named_by = ("nonfinite", "nan")

    def command(self) -> Command:
        c: NanConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where=c.where, ranks=self._ranks(), steps=c.steps,
                       params={"value": float(c.value), "tensor": c.tensor, "element": c.element})
