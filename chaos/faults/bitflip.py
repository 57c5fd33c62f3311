"""Flip one bit of one element of a parameter, a gradient, the all-reduced gradient bucket or the optimizer state on one rank: silent data corruption."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import COMM_ENV, Command
from chaos.runtime.context import RunContext


class BitflipConfig(InStepConfig):
    where: Literal["param", "grad", "grad_local", "bucket", "optimizer_state"] = "param"
    """param: the weight itself, between two steps (that rank's replica now differs from its peers');
    grad: the gradient as backward computes it, before the all-reduce (every rank averages the flipped
    value in: the replicas agree, on a wrong update); grad_local: the gradient after the all-reduce, as
    this rank's optimizer reads it; bucket: the all-reduced gradient bucket as the collective hands it back
to this rank (its first bucket, through a DDP communication hook: a reduction corrupted on its way, DDP
only), so this rank's gradients, and then its replica, differ from its peers'; optimizer_state: the optimizer's first tensor state of the parameter
    (AdamW's exp_avg), between two steps."""
    bit: int = Field(default=30, ge=0, le=63)
    """Which bit of the element's bits (30: the top exponent bit of a float32, which turns 0.01 into about 3e36)."""
    tensor: int = 0
    """Which parameter, by its position in the optimizer's parameter groups."""
    element: int = 0
    """Which element of it (flattened; taken modulo its size; bucket: of the bucket's flat buffer)."""
    state_key: str | None = None
    """optimizer_state: the state's name (exp_avg, exp_avg_sq, momentum_buffer); default the first tensor state."""


class Bitflip(InStepFault, kind="bitflip"):
    """Flip one bit of one element of a parameter, a gradient, the all-reduced gradient bucket or the optimizer state on one rank: silent data corruption."""

    Config = BitflipConfig
    named_by = ("sdc", "nonfinite")

    def prepare(self, run: RunContext) -> None:
        super().prepare(run)
        if self.config.where == "bucket":  # type: ignore[attr-defined]
            run.workload_env[COMM_ENV] = "1"  # DDP models register the communication hook it acts through

    def command(self) -> Command:
        c: BitflipConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where=c.where, ranks=self._ranks(), steps=c.steps,
                       params={"bit": c.bit, "tensor": c.tensor, "element": c.element,
                               **({"state_key": c.state_key} if c.state_key else {})})
