"""Requeue the run's Slurm job (``scontrol requeue``), as an operator or a health check does: it is killed and starts again from its checkpoint."""

from __future__ import annotations

from typing import Any

from chaos.runtime.context import RunContext
from chaos.faults.base import Fault, FaultConfig


class RequeueConfig(FaultConfig):
    """No fields of its own: the job is the run's, and where it runs again is Slurm's choice."""


class Requeue(Fault, kind="requeue"):
    """Requeue the run's Slurm job (``scontrol requeue``), as an operator or a health check does: it is killed and starts again from its checkpoint."""

    Config = RequeueConfig
    needs_target = ("slurm",)

    def plan(self, run: RunContext) -> list[str]:
        return ["scontrol requeue <the run's job id>: Slurm signals every step (SIGTERM, KillWait, SIGKILL), "
                "holds the job for the cluster's requeue delay, then schedules it again"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        # Nothing to revert: a requeue is not undone, the job's recovery is what is judged. The job
        # itself is cancelled at teardown by the target's ledger entry.
        ctl, job_id = run.target.running_job()  # type: ignore[union-attr]
        nodes = run.target.job_nodes()  # type: ignore[union-attr]
        ctl.requeue(job_id)
        return {"job_id": job_id, "nodes": nodes}
