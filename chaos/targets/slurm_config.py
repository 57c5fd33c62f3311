"""The slurm target's settings: a local cluster on this host's namespaces or an existing cluster, and which
fields belong to which (the target itself is chaos.targets.slurm)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from chaos.targets.netns import NetnsConfig

CLIENT_COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "srun")
"""What ``cluster: existing`` needs on the submit host."""
LOCAL_ONLY = ("spare_nodes", "requeue_delay_s", "slurmd_timeout_s")
EXISTING_ONLY = ("conf", "partition", "account", "qos", "time", "shared_dir", "preempt_partition")
REFUSED_ON_EXISTING = {
    "kill-node": "kills a node's slurmd and every process on it, which needs root on a compute node of your "
                 "cluster; run it on the local cluster (target.cluster: local)",
    "partition": "cuts a node's network namespace, which only the local cluster's nodes have (target.cluster: local)",
    "network-degrade": "shapes a node's network namespace, which only the local cluster's nodes have "
                       "(target.cluster: local)",
    "storage-full": "fills a filesystem mounted on the submit host only; the compute nodes would not see it "
                    "(target.cluster: local)",
    "read-only-storage": "remounts the checkpoint directory on the submit host only; the compute nodes would not "
                         "see it (target.cluster: local)",
}
"""Faults that would act on the cluster itself rather than on the run's own job: refused before launch."""


class SlurmConfig(NetnsConfig):
    cluster: Literal["local", "existing"] = "local"
    """local: a throwaway real Slurm cluster on this host for the run (needs root, slurm-wlm and munge).
    existing: submit to your cluster (SLURM_CONF, or ``conf``), e.g. a staging partition; needs ``shared_dir``."""
    nodes: int = Field(default=2, ge=1, le=32)
    """Nodes of the job (sbatch --nodes), one torchrun agent each."""
    conf: str | None = None
    """existing: the cluster's slurm.conf (default: $SLURM_CONF, else Slurm's compiled-in default)."""
    partition: str | None = None
    """existing: sbatch --partition (default: the cluster's default partition)."""
    account: str | None = None
    """existing: sbatch --account."""
    qos: str | None = None
    """existing: sbatch --qos."""
    time: str | None = None
    """existing: sbatch --time (e.g. "00:20:00"); the job is cancelled at the end of the run either way."""
    shared_dir: str | None = None
    """existing (required): a directory every node sees at the same path; the run directory (events,
    checkpoints, the job's scripts) must be inside it: ``chaos run --runs-dir SHARED_DIR/runs``."""
    GOLDEN_NEUTRAL: ClassVar[frozenset[str]] = frozenset(
        {"spare_nodes", "requeue_delay_s", "slurmd_timeout_s", "term_before_end_s", "preempt_partition"})

    preempt_partition: str | None = None
    """existing: a partition whose jobs preempt the run's (higher PriorityTier), for the preempt fault."""
    spare_nodes: int = Field(default=0, ge=0, le=8)
    """Idle nodes beyond ``nodes``, where Slurm can start the job again after it lost one."""
    requeue_delay_s: int = Field(default=5, ge=1, le=600)
    """How long Slurm holds a requeued job before it may start again (slurm.conf AuthInfo cred_expire;
    Slurm's default is 120 s, which a real cluster's requeue latency includes)."""
    slurmd_timeout_s: int = Field(default=10, ge=3, le=600)
    """How long the controller waits on a silent node before it marks it DOWN and requeues its job
    (SlurmdTimeout; Slurm's default is 300 s)."""
    term_before_end_s: int | None = Field(default=None, ge=1, le=65535)
    """sbatch --signal=TERM@N: SIGTERM to every task N seconds before the job's time limit, so the
    job saves and requeues itself (the same path as a preemption) instead of being killed at the
    limit; with ``time``, a job longer than one allocation runs as a chain of requeues."""
    sbatch_args: list[str] = Field(default_factory=list)
    """Extra sbatch options, e.g. ["--gres=gpu:8"] (each one #SBATCH line)."""

    @model_validator(mode="after")
    def _fields_of_the_mode(self) -> "SlurmConfig":
        wrong = LOCAL_ONLY if self.cluster == "existing" else EXISTING_ONLY
        given = sorted(f for f in wrong if f in self.model_fields_set)
        if given:
            why = ("your cluster's own slurm.conf decides it" if self.cluster == "existing"
                   else "they describe a cluster of yours (cluster: existing)")
            raise ValueError(f"{', '.join(given)} only apply to cluster: "
                             f"{'local' if self.cluster == 'existing' else 'existing'}: {why}")
        if self.cluster == "existing" and not self.shared_dir:
            raise ValueError("cluster: existing needs shared_dir: a directory every node of the job sees at the "
                             "same path (the run directory, events and checkpoints live there)")
        return self

    def sbatch_options(self) -> list[str]:
        """The #SBATCH lines of the mode: a cluster of the user's gets partition/account/qos/time."""
        opts = [f"--{k}={getattr(self, k)}" for k in ("partition", "account", "qos", "time") if getattr(self, k)]
        if self.term_before_end_s:
            opts.append(f"--signal=TERM@{self.term_before_end_s}")
        return opts + list(self.sbatch_args)
