"""Preempt the run's Slurm job with higher-priority work: SIGTERM to every task, a grace period, SIGKILL, requeue."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import Field

from chaos.runtime.context import RunContext
from chaos.faults.base import Fault, FaultConfig
from chaos.slurm.minicluster import PARTITION, URGENT_PARTITION
from chaos.runtime.undo import Command


class PreemptConfig(FaultConfig):
    grace_s: int = Field(default=15, ge=0, le=3600)
    """Seconds from the SIGTERM to the SIGKILL (the job partition's GraceTime): the time the job has to save."""
    node: int = Field(default=-1, ge=-64, le=63)
    """Which of the job's nodes the urgent job takes, as an index into its node list (-1: the last). Taking any one node preempts the whole job."""


class Preempt(Fault, kind="preempt"):
    """Preempt the run's Slurm job with higher-priority work: SIGTERM to every task, a grace period, SIGKILL, requeue.

    The preemption is Slurm's own (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE): the
    fault submits a job to the cluster's higher-priority partition pinned to one of the job's
    nodes, and the controller does the rest, as it would for production work on a shared cluster.
    The urgent job holds the node until the fault is reverted (duration_s, or the end of the run),
    so the requeued job starts on a spare node or waits for it.
    """

    Config = PreemptConfig
    needs_target = ("slurm",)

    def _urgent_name(self, run: RunContext) -> str:
        from chaos.runtime.network import run_names

        return f"chaos-{run_names(run).rid}-preempt{self.index}"

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"scontrol update PartitionName={PARTITION} GraceTime={c.grace_s}",
                f"sbatch --partition={URGENT_PARTITION} --nodelist=<node {c.node} of the job> --nodes=1 "
                f"--job-name={self._urgent_name(run)} --wrap 'sleep infinity' (Slurm preempts the job: SIGTERM, "
                f"{c.grace_s} s, SIGKILL, requeue); revert: scancel --name={self._urgent_name(run)}, "
                f"GraceTime=0"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        target = run.target
        ctl, job_id = target.running_job()  # type: ignore[union-attr]
        node = target.job_node(c.node)  # type: ignore[union-attr]
        name = self._urgent_name(run)
        if target.local:  # type: ignore[union-attr]
            # The throwaway cluster's partition is the run's own; on a user's cluster its GraceTime
            # is left alone (Slurm.admit refuses grace_s there).
            run.ledger.push(self.owner, Command(ctl.undo_argv("scontrol", "update", f"PartitionName={PARTITION}",
                                                              "GraceTime=0")))
            ctl.run("scontrol", "update", f"PartitionName={PARTITION}", f"GraceTime={c.grace_s}")
        # Pushed before the submit: a job id comes back only if it worked, the name is known now.
        run.ledger.push(self.owner, Command(ctl.undo_argv("scancel", f"--name={name}")))
        partition = URGENT_PARTITION if target.local else target.config.preempt_partition  # type: ignore[union-attr]
        urgent = ctl.submit(None, options=[
            f"--partition={partition}", f"--nodelist={node}", "--nodes=1", "--ntasks=1",
            f"--job-name={name}", f"--output={run.run_dir.resolve() / ('slurm-' + name + '-%j.out')}",
            "--wrap", shlex.join(["sleep", "infinity"])])
        return {"job_id": job_id, "node": node, "urgent_job": urgent, "partition": partition,
                "grace_s": c.grace_s if target.local else None}  # type: ignore[union-attr]
