"""Target ``slurm``: the job runs as a Slurm batch job, and recovers through Slurm's own paths.

``cluster: local`` brings up a throwaway real cluster for the run (chaos/slurm/minicluster.py): the
netns target's nodes, each running a slurmd, and a slurmctld on the run's bridge. The harness
submits ``slurm-job.sh`` (kept in the run directory) with sbatch, follows the job with
``scontrol show job`` (state changes, node list and each requeue go to harness.jsonl as
``slurm_job`` records), and cancels it at the end. Because the nodes are this host's namespaces, the
run's process tree still holds every rank (each slurmd runs under a subreaper), so rank, node,
network and storage faults act on them exactly as on the netns target.

How this maps onto Kubernetes (not runnable on these machines) is in docs/slurm.md.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from chaos.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.health.exclusions import exclusions_path, read_exclusions
from chaos.launch import workload_argv, workload_env
from chaos.network import run_names
from chaos.slurm.batch import BatchJob, node_rendezvous
from chaos.slurm.control import JobState, SlurmControl
from chaos.slurm.minicluster import ClusterNode, ClusterSpec, MiniCluster, missing_commands, state_root
from chaos.targets.base import Node
from chaos.targets.netns import Netns, NetnsConfig, nnodes_arg, require_root
from chaos.undo import Command

POLL_JOB_S = 0.25
"""How often the job's state is asked for: a requeue or the end is seen within this (scontrol costs ~10 ms)."""


class SlurmConfig(NetnsConfig):
    cluster: Literal["local"] = "local"
    """local: a throwaway real Slurm cluster on this host for the run (needs root, slurm-wlm and munge)."""
    spare_nodes: int = Field(default=0, ge=0, le=8)
    """Idle nodes beyond ``nodes``, where Slurm can start the job again after it lost one."""
    requeue_delay_s: int = Field(default=5, ge=1, le=600)
    """How long Slurm holds a requeued job before it may start again (slurm.conf AuthInfo cred_expire;
    Slurm's default is 120 s, which a real cluster's requeue latency includes)."""
    slurmd_timeout_s: int = Field(default=10, ge=3, le=600)
    """How long the controller waits on a silent node before it marks it DOWN and requeues its job
    (SlurmdTimeout; Slurm's default is 300 s)."""
    sbatch_args: list[str] = Field(default_factory=list)
    """Extra sbatch options, e.g. ["--time=00:10:00"] (each one #SBATCH line)."""


class Slurm(Netns, kind="slurm"):
    """The workload as a Slurm batch job on a real (throwaway, local) cluster: sbatch + srun + torchrun per node."""

    Config = SlurmConfig
    config: SlurmConfig

    def __init__(self, config: SlurmConfig) -> None:
        super().__init__(config)
        self.cluster: MiniCluster | None = None
        self.job_id: str | None = None
        self.job: JobState | None = None
        self._asked = 0.0
        self._exclusions_seen: int | None = None
        self._drained: set[str] = set()

    @property
    def namespace_count(self) -> int:
        return self.config.nodes + self.config.spare_nodes

    def check(self, run: RunContext) -> None:
        require_root("slurm target's local cluster")
        missing = missing_commands()
        if missing:
            raise CapabilityError(f"the slurm target's local cluster needs {', '.join(missing)}: "
                                  f"apt-get install -y slurm-wlm munge (scripts/setup.sh does it when run as root)")
        super().check(run)

    def owned_dirs(self, run: RunContext) -> list[Path]:
        return [state_root(run_names(run).rid)]

    # ------------------------------------------------------------------------------- the cluster

    def _cluster(self, run: RunContext) -> MiniCluster:
        if self.cluster is None:
            names = run_names(run)
            subnet = self._addressing(run)
            nodes = self._nodes(run)
            root = state_root(names.rid) / "cluster"
            spec = ClusterSpec(
                name=f"chaos{names.rid}", controller_host=os.uname().nodename,
                controller_address=str(subnet.network_address + 1),
                nodes=tuple(ClusterNode(n.name, n.address or "", n.info["netns"]) for n in nodes),
                state=root, logs=run.run_dir.resolve() / "slurm", munge_socket=root / "munge" / "munge.socket",
                requeue_delay_s=self.config.requeue_delay_s, slurmd_timeout_s=self.config.slurmd_timeout_s)
            self.cluster = MiniCluster(run, spec, spec.logs / "slurm.conf", names.switch_ns)
        return self.cluster

    def _controller_address_cmd(self, run: RunContext) -> list[str]:
        n = run_names(run)
        subnet = self._addressing(run)
        return ["ip", "-n", n.switch_ns, "addr", "add", f"{subnet.network_address + 1}/{subnet.prefixlen}",
                "dev", n.bridge]

    def plan(self, run: RunContext) -> list[str]:
        lines = [line for line in super().plan(run) if not line.startswith("launch node")]
        lines.append(f"netns: {shlex.join(self._controller_address_cmd(run))}")
        lines += self._cluster(run).plan()
        job = self._batch(run)
        lines.append(f"slurm: write {run.run_dir / 'slurm-job.sh'} and {run.run_dir / 'slurm-node.sh'}; "
                     f"sbatch --parsable {run.run_dir / 'slurm-job.sh'} (nodes {job.nodes}); per node: "
                     f"{shlex.join(job.command)}")
        return lines

    def prepare(self, run: RunContext) -> None:
        super().prepare(run)  # namespaces, bridge, addresses (nodes + spares)
        run.shell.run(self._controller_address_cmd(run))
        cluster = self._cluster(run)
        cluster.start()
        for node in self.nodes:
            run.tree.add_root(node.name, cluster.node_pids[node.name])
            node.info["slurm_node"] = node.name

    # ------------------------------------------------------------------------------- the job

    def _batch(self, run: RunContext) -> BatchJob:
        c = self.config
        nodes = self._nodes(run)
        nnodes = nnodes_arg(c.nodes, c.min_nodes)
        rdzv = node_rendezvous(nnodes=nnodes, port=c.rdzv_port, rdzv_conf={
            "last_call_timeout": str(c.last_call_timeout_s), "keep_alive_interval": str(c.keep_alive_interval_s)})
        return BatchJob(
            name=f"chaos-{run_names(run).rid}", nodes=nnodes.replace(":", "-"), output=str(run.run_dir.resolve() / "slurm-%j.out"),
            chdir=os.getcwd(), node_script_path=str(run.run_dir.resolve() / "slurm-node.sh"), launch=run.launch_no,
            rid=run_names(run).rid, command=workload_argv(run, rdzv),
            addresses={n.name: n.address or "" for n in nodes},
            ifnames={n.name: n.info["ifname"] for n in nodes}, sbatch_args=list(c.sbatch_args))

    def launch(self, run: RunContext) -> list[Node]:
        cluster = self._cluster(run)
        job = self._batch(run)
        job_script, node_script = run.run_dir.resolve() / "slurm-job.sh", run.run_dir.resolve() / "slurm-node.sh"
        job_script.write_text(job.job_script())
        node_script.write_text(job.node_script())
        node_script.chmod(0o755)
        env = workload_env(run, "slurm")
        env.pop("CHAOS_HOST", None)  # each node names itself (slurm-node.sh)
        delta = {k: v for k, v in env.items() if os.environ.get(k) != v}
        ctl = cluster.control
        self.job_id = ctl.submit(str(job_script), env=delta)
        active = f"squeue -h -j {self.job_id} -t PD,R,CG,CF,S,RQ,SE 2>/dev/null | grep -q ."
        run.ledger.push("target/procs", Command(ctl.undo_argv("scancel", self.job_id),
                                                only_if=ctl.undo_argv("sh", "-c", active)))
        run.log("slurm_submit", job_id=self.job_id, script=str(job_script), nodes=job.nodes)
        return self.nodes

    def running_job(self) -> tuple["SlurmControl", str]:
        """The cluster's client commands and the run's job id, for a fault that acts through Slurm."""
        if self.cluster is None or self.job_id is None:
            raise FaultError("the Slurm job has not been submitted yet")
        return self.cluster.control, self.job_id

    def job_nodes(self) -> list[str]:
        """The Slurm node names the job runs on now (scontrol's NodeList, expanded), first node first."""
        ctl, job_id = self.running_job()
        state = ctl.job(job_id)
        if state is None or not state.nodes:
            raise FaultError(f"job {job_id} has no nodes now (state {state.state if state else 'unknown'})")
        return ctl.hostnames(state.nodes)

    def job_node_names(self) -> list[str]:
        return self.job_nodes()

    def _drain_excluded(self, state: JobState) -> None:
        """Play the cluster's node health check: a GPU the workload's monitor excluded takes its node
        out of service (DRAIN, with the XID as the reason, as NHC or an operator would), and the
        job is requeued so Slurm starts it again without that node (a spare, or fewer nodes with
        min_nodes). The node is resumed when the run ends (the ledger)."""
        assert self.cluster is not None and self.job_id is not None
        path = exclusions_path(self.cluster.run.run_dir)
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return
        if stamp == self._exclusions_seen:
            return
        self._exclusions_seen = stamp
        run, ctl = self.cluster.run, self.cluster.control
        for entry in read_exclusions(path):
            node = str(entry.get("host") or "")
            if node not in {n.name for n in self.nodes} or node in self._drained:
                continue
            self._drained.add(node)
            reason = f"XID {entry.get('code')} on GPU {entry.get('bus_id')} (chaos run {run_names(run).rid})"
            drained = f"scontrol show node -o {shlex.quote(node)} | grep -q DRAIN"
            run.ledger.push("target", Command(ctl.undo_argv("scontrol", "update", f"NodeName={node}", "State=RESUME"),
                                              only_if=ctl.undo_argv("sh", "-c", drained)))
            ctl.update_node(node, State="DRAIN", Reason=reason)
            requeue = state.running and node in ctl.hostnames(state.nodes)
            if requeue:
                ctl.requeue(self.job_id)
            run.log("slurm_drain", node=node, reason=reason, device=entry.get("device"), job_id=self.job_id,
                    requeued=requeue)

    def exit_code(self) -> int | None:
        """None while the job may still run (pending, running, requeued); then its exit status."""
        if self.cluster is None or self.job_id is None:
            return 1
        now = time.monotonic()
        if now - self._asked < POLL_JOB_S and self.job is not None and not self.job.finished:
            return None
        self._asked = now
        state = self.cluster.control.job(self.job_id)
        if state is None:  # the controller did not answer this time: ask again next poll
            return None
        previous, self.job = self.job, state
        self._drain_excluded(state)
        if previous is None or state.summary() != previous.summary():
            self.cluster.run.log("slurm_job", **state.summary())
            if previous is not None and state.restarts > previous.restarts:
                self.cluster.run.log("slurm_requeue", job_id=state.job_id, restarts=state.restarts,
                                     reason=state.reason)
        return state.shell_exit_code() if state.finished else None
