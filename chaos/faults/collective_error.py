"""Make DDP's gradient all-reduce fail on one rank, never complete there, or kill the rank inside it."""

from __future__ import annotations

from typing import Literal

from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import COMM_ENV, Command
from chaos.runtime.context import RunContext


class CollectiveErrorConfig(InStepConfig):
    mode: Literal["error", "hang", "kill"] = "error"
    """error: the all-reduce of the rank's first gradient bucket fails (its backward raises; a stack should
    stop every rank fast). hang: it never completes on that rank, and its peers wait in the collective
    until their timeout (the hang that holds a cluster for hours without one). kill: the rank's process
    is SIGKILLed as that all-reduce begins, so its peers lose it inside the collective (a host that dies
    mid-step: the case a drop-replica framework must survive by discarding the step)."""


class CollectiveError(InStepFault, kind="collective-error"):
    """Make DDP's gradient all-reduce fail on one rank, never complete there (its peers wait in the collective),
    or kill the rank inside it (its peers lose it mid-collective).

    Acts through a DDP communication hook that every DistributedDataParallel model built in the run's
    ranks registers (chaos.instep.comm): DDP only; a model DDP does not wrap reports no landing.
    """

    Config = CollectiveErrorConfig
    named_by = ("collective", "timeout")

    def prepare(self, run: RunContext) -> None:
        super().prepare(run)
        run.workload_env[COMM_ENV] = "1"

    def command(self) -> Command:
        c: CollectiveErrorConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where="allreduce", ranks=self._ranks(), steps=c.steps,
                       params={"mode": c.mode})
