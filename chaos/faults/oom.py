"""Make the next forward on one rank fail with an out-of-memory error, the way CUDA's allocator raises it."""

from __future__ import annotations

from pydantic import Field

from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import Command


class OomConfig(InStepConfig):
    gib: float = Field(default=2.0, gt=0, le=1e6)
    """The allocation the message says failed (GiB)."""


class Oom(InStepFault, kind="oom"):
    """Make the next forward on one rank fail with an out-of-memory error, the way CUDA's allocator raises it.

    The rank's outermost forward raises ``torch.OutOfMemoryError`` ("CUDA out of memory. Tried to
    allocate ..."), the exception a real one is, so the stack's own handling runs: a rank that dies of
    it is restarted by torchrun; its peers must not be left waiting in the step's collective.
    """

    Config = OomConfig

    def command(self) -> Command:
        c: OomConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where="forward", ranks=self._ranks(), steps=c.steps,
                       params={"gib": c.gib})
