"""Target ``slurm``: the job runs as a Slurm batch job, and recovers through Slurm's own paths.

``cluster: local`` brings up a throwaway real cluster for the run (chaos/slurm/minicluster.py): the
netns target's nodes, each running a slurmd, and a slurmctld on the run's bridge. The harness
submits ``slurm-job.sh`` (kept in the run directory) with sbatch, follows the job with
``scontrol show job`` (state changes, node list and each requeue go to harness.jsonl as
``slurm_job`` records), and cancels it at the end. Because the nodes are this host's namespaces, the
run's process tree still holds every rank (each slurmd runs under a subreaper), so rank, node,
network and storage faults act on them exactly as on the netns target.

``cluster: existing`` submits the same scripts to the user's cluster (a staging partition), with
the run directory on a filesystem its nodes share. The harness cannot see the compute nodes'
processes there, so rank faults act through ``srun --overlap --jobid`` steps inside the job's own
allocation (chaos/slurm/steps.py), and what would touch the cluster itself (a node's daemon or
network, a drain without operator rights, another partition's settings) is refused before launch.

How this maps onto Kubernetes (not runnable on these machines) is in docs/slurm.md.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import signal as _signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.health.exclusions import exclusions_path, read_exclusions
from chaos.runtime.launch import with_package, workload_argv, workload_cwd, workload_env
from chaos.runtime.network import run_names
from chaos.runtime.processes import Worker
from chaos.slurm.batch import BatchJob, node_rendezvous
from chaos.slurm.control import JobState, SlurmControl
from chaos.slurm.minicluster import (PARTITION, ClusterNode, ClusterSpec, MiniCluster, missing_commands,
                                     state_root)
from chaos.targets.base import ClusterModes, Node, require_shared_dir
from chaos.slurm.dutycycle import RemoteDutyCycle
from chaos.targets.netns import Netns, nnodes_arg, require_root
from chaos.targets.slurm_config import CLIENT_COMMANDS, REFUSED_ON_EXISTING, SlurmConfig
from chaos.runtime.undo import Command, KillTree

POLL_JOB_S = 0.25
"""How often the job's state is asked for: a requeue or the end is seen within this (scontrol costs ~10 ms)."""


class Slurm(ClusterModes, Netns, kind="slurm"):
    """The workload as a Slurm batch job: sbatch + srun + torchrun per node, on a throwaway local cluster or yours."""

    Config = SlurmConfig
    config: SlurmConfig

    def __init__(self, config: SlurmConfig) -> None:
        super().__init__(config)
        self.cluster: MiniCluster | None = None
        self.control: SlurmControl | None = None
        self.run: RunContext | None = None
        self.job_id: str | None = None
        self.job: JobState | None = None
        self._asked = 0.0
        self._exclusions_seen: int | None = None
        self._drained: set[str] = set()

    @property
    def namespace_count(self) -> int:
        return self.config.nodes + self.config.spare_nodes if self.local else 0

    @property
    def partition(self) -> str | None:
        """The partition the job runs in (None: the cluster's default)."""
        return PARTITION if self.local else self.config.partition

    def check(self, run: RunContext) -> None:
        super().check(run)
        if self.local:
            require_root("slurm target's local cluster")
            missing = missing_commands()
            if missing:
                raise CapabilityError(f"the slurm target's local cluster needs {', '.join(missing)}: "
                                      f"apt-get install -y slurm-wlm munge (scripts/setup.sh does it when run as root)")
            super().check(run)
            return
        self._check_existing(run)

    def _check_existing(self, run: RunContext) -> None:
        c = self.config
        missing = [cmd for cmd in CLIENT_COMMANDS if shutil.which(cmd) is None]
        if missing:
            raise CapabilityError(f"cluster: existing needs Slurm's client commands on this host ({', '.join(missing)} "
                                  f"not found): run the harness on a login node, or install slurm-client")
        if c.conf is not None and not Path(c.conf).is_file():
            raise CapabilityError(f"target.conf: {c.conf} is not a file (the cluster's slurm.conf)")
        ctl = self._control(run)
        ping = ctl.run("scontrol", "ping", check=False, timeout=15)
        if not ping.ok or "UP" not in ping.stdout:
            raise CapabilityError(f"cannot reach the Slurm controller (scontrol ping: "
                                  f"{(ping.stdout + ping.stderr).strip()[:300] or 'no answer'}); set SLURM_CONF or "
                                  f"target.conf to your cluster's slurm.conf")
        for what, name in (("partition", c.partition), ("preempt_partition", c.preempt_partition)):
            if name and not ctl.run("scontrol", "show", "partition", "-o", name, check=False, timeout=15).ok:
                raise CapabilityError(f"target.{what}: the cluster has no partition '{name}' (sinfo -s lists them)")
        require_shared_dir(run, c.shared_dir, "compute nodes")

    def admit(self, run: RunContext, kind: str, config: Any) -> None:
        """Refuse, before anything starts, a fault this cluster does not let the run do to its own job."""
        if self.local:
            return
        if kind in REFUSED_ON_EXISTING:
            raise CapabilityError(f"fault {kind} on an existing cluster: it {REFUSED_ON_EXISTING[kind]}")
        if kind == "preempt":
            if not self.config.preempt_partition:
                raise CapabilityError("fault preempt on an existing cluster needs target.preempt_partition: a "
                                      "partition whose jobs preempt the run's (PreemptType=preempt/partition_prio, "
                                      "a higher PriorityTier) and that you may submit to")
            if "grace_s" in config.model_fields_set:
                raise CapabilityError("fault preempt: grace_s sets the partition's GraceTime, which on your cluster "
                                      "applies to every job in it; remove grace_s (the partition's own GraceTime "
                                      "is used: scontrol show partition)")
        if kind == "xid" and not self._operator(run):
            raise CapabilityError(f"fault xid on an existing cluster: the node of an excluded GPU is drained "
                                  f"(scontrol update NodeName=... State=DRAIN), which needs Slurm operator rights "
                                  f"(AdminLevel=Operator, or the SlurmUser); {pwd.getpwuid(os.geteuid()).pw_name} "
                                  f"has none")

    def _operator(self, run: RunContext) -> bool:
        """May this user drain and resume nodes: root, the cluster's SlurmUser, or AdminLevel Operator/Administrator."""
        if os.geteuid() == 0:
            return True
        user = pwd.getpwuid(os.geteuid()).pw_name
        ctl = self._control(run)
        config = ctl.run("scontrol", "show", "config", check=False, timeout=15).stdout
        if any(line.split("=", 1)[0].strip() == "SlurmUser" and line.split("=", 1)[1].strip().split("(")[0] == user
               for line in config.splitlines() if "=" in line):
            return True
        if shutil.which("sacctmgr"):
            level = ctl.run("sacctmgr", "-n", "-P", "show", "user", user, "format=AdminLevel", check=False,
                            timeout=15).stdout.strip()
            return level in {"Operator", "Administrator"}
        return False

    def owned_dirs(self, run: RunContext) -> list[Path]:
        return [state_root(run_names(run).rid)] if self.local else []

    # ------------------------------------------------------------------------------- the cluster

    def _control(self, run: RunContext) -> SlurmControl:
        if self.control is None:
            self.control = (self._cluster(run).control if self.local
                            else SlurmControl(run.shell, conf=self.config.conf))
        return self.control

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
        lines: list[str] = []
        if self.local:
            lines = [line for line in super().plan(run) if not line.startswith("launch node")]
            lines.append(f"netns: {shlex.join(self._controller_address_cmd(run))}")
            lines += self._cluster(run).plan()
        else:
            conf = self.config.conf or os.environ.get("SLURM_CONF") or "Slurm's default slurm.conf"
            lines.append(f"slurm: your cluster ({conf}); the run directory {run.run_dir.resolve()} on the shared "
                         f"filesystem {self.config.shared_dir}; nothing but the run's own job is touched")
        job = self._batch(run)
        lines.append(f"slurm: write {run.run_dir / 'slurm-job.sh'} and {run.run_dir / 'slurm-node.sh'}; "
                     f"sbatch --parsable {run.run_dir / 'slurm-job.sh'} (nodes {job.nodes}"
                     f"{', ' + ' '.join(job.sbatch_args) if job.sbatch_args else ''}); per node: "
                     f"{shlex.join(job.command)}")
        if not self.local:
            lines.append("slurm: rank faults as steps in the job's allocation: srun --overlap --jobid=<job> "
                         f"--nodelist=<node> {sys.executable} -m chaos.slurm.steps list|signal|duty ...")
        return lines

    def prepare(self, run: RunContext) -> None:
        self.run = run
        if not self.local:
            return
        super().prepare(run)  # namespaces, bridge, addresses (nodes + spares)
        run.shell.run(self._controller_address_cmd(run))
        cluster = self._cluster(run)
        cluster.start()
        for node in self.nodes:
            run.tree.add_root(node.name, cluster.node_pids[node.name])
            node.info["slurm_node"] = node.name

    def teardown(self, run: RunContext) -> list[Any]:
        t0 = run.clock.mono()
        failures = super().teardown(run)
        if self.cluster is not None:  # daemons stopped, state removed, namespaces deleted
            run.log("slurm_cluster_down", seconds=round(run.clock.mono() - t0, 3), failures=len(failures))
        return failures

    # ------------------------------------------------------------------------------- the job

    def _batch(self, run: RunContext) -> BatchJob:
        c = self.config
        nodes = self._nodes(run) if self.local else []
        nnodes = nnodes_arg(c.nodes, c.min_nodes)
        rdzv = node_rendezvous(nnodes=nnodes, port=c.rdzv_port, rdzv_conf={
            "last_call_timeout": str(c.last_call_timeout_s), "keep_alive_interval": str(c.keep_alive_interval_s)})
        return BatchJob(
            name=f"chaos-{run_names(run).rid}", nodes=nnodes.replace(":", "-"), output=str(run.run_dir.resolve() / "slurm-%j.out"),
            chdir=workload_cwd(run, make=False) or os.getcwd(), node_script_path=str(run.run_dir.resolve() / "slurm-node.sh"), launch=run.launch_no,
            rid=run_names(run).rid, command=workload_argv(run, rdzv),
            addresses={n.name: n.address or "" for n in nodes},
            ifnames={n.name: n.info["ifname"] for n in nodes}, sbatch_args=c.sbatch_options())

    def launch(self, run: RunContext) -> list[Node]:
        self.run = run
        ctl = self._control(run)
        workload_cwd(run)  # made before sbatch --chdir needs it
        job = self._batch(run)
        job_script, node_script = run.run_dir.resolve() / "slurm-job.sh", run.run_dir.resolve() / "slurm-node.sh"
        job_script.write_text(self.as_nodes_see(job.job_script()))  # the nodes' own path of shared_dir
        node_script.write_text(self.as_nodes_see(job.node_script()))
        node_script.chmod(0o755)
        env = workload_env(run, "slurm")
        env.pop("CHAOS_HOST", None)  # each node names itself (slurm-node.sh)
        delta = {k: self.as_nodes_see(v) for k, v in env.items() if os.environ.get(k) != v}
        self.job_id = ctl.submit(str(job_script), env=delta)
        active = f"squeue -h -j {self.job_id} -t PD,R,CG,CF,S,RQ,SE 2>/dev/null | grep -q ."
        run.ledger.push("target/procs", Command(ctl.undo_argv("scancel", self.job_id),
                                                only_if=ctl.undo_argv("sh", "-c", active)))
        run.log("slurm_submit", job_id=self.job_id, script=str(job_script), nodes=job.nodes,
                cluster=self.config.cluster, options=job.sbatch_args)
        return self.nodes

    def running_job(self) -> tuple["SlurmControl", str]:
        """The cluster's client commands and the run's job id, for a fault that acts through Slurm."""
        if self.control is None or self.job_id is None:
            raise FaultError("the Slurm job has not been submitted yet")
        return self.control, self.job_id

    def job_nodes(self, state: JobState | None = None) -> list[str]:
        """The Slurm node names the job runs on now (scontrol's NodeList, expanded), first node first."""
        ctl, job_id = self.running_job()
        state = state or ctl.job(job_id)
        if state is None or not state.nodes:
            raise FaultError(f"job {job_id} has no nodes now (state {state.state if state else 'unknown'})")
        return ctl.hostnames(state.nodes)

    def job_node(self, index: int) -> str:
        """Node ``index`` of the job's node list (negative counts from the end), or a FaultError saying how many there are."""
        nodes = self.job_nodes()
        if not -len(nodes) <= index < len(nodes):
            raise FaultError(f"the job runs on {len(nodes)} node(s) ({', '.join(nodes)}): there is no node {index}")
        return nodes[index]

    def job_node_names(self) -> list[str]:
        return self.job_nodes()

    # ------------------------------------------------------------------------------- remote ranks

    def _step(self, *args: str, node: str | None = None, nodes: int = 1) -> list[str]:
        """``srun`` argv of a step inside the running job (on ``node``, or one task on each of ``nodes``)."""
        _ctl, job_id = self.running_job()
        where = [f"--nodelist={node}", "--nodes=1", "--ntasks=1"] if node else [f"--nodes={nodes}",
                                                                                  "--ntasks-per-node=1"]
        # --overlap: share the job's CPUs (the ranks hold them all); --quiet: stdout is the answer.
        return ["srun", "--overlap", f"--jobid={job_id}", *where, "--quiet", "--kill-on-bad-exit=0",
                *map(self.as_nodes_see, [sys.executable, "-m", "chaos.slurm.steps", *args])]

    def _step_env(self) -> dict[str, str]:
        return {"PYTHONPATH": self.as_nodes_see(with_package(os.environ.get("PYTHONPATH")))}

    def workers(self, run: RunContext) -> list[Worker]:
        """Live workers of the run: the process tree on the local cluster; on yours, a listing step on every node."""
        if self.local:
            return run.tree.workers()
        ctl, job_id = self.running_job()
        state = ctl.job(job_id)
        if state is None or not state.running:
            return []
        nodes = self.job_nodes(state)
        res = ctl.run(*self._step("list", str(run.run_dir.resolve()), nodes=len(nodes)), check=False, timeout=60,
                      env=self._step_env())
        out = []
        for line in res.stdout.splitlines():
            try:
                w = json.loads(line)
            except ValueError:
                continue
            # The newest launch is the newest round: a requeue raises CHAOS_LAUNCH on every node.
            out.append(Worker(pid=w["pid"], create_time=w["create_time"], rank=w["rank"], local_rank=w["local_rank"],
                              restart_count=w["restart_count"], node=w["node"], launch=w["launch"],
                              generation=w["launch"] or 0))
        if not out and not res.ok:
            raise FaultError(f"listing the job's workers failed (srun exit {res.returncode}): {res.stderr.strip()[:300]}")
        return out

    def signal(self, run: RunContext, workers: list[Worker], sig: _signal.Signals) -> list[int]:
        """Signal ``workers`` through one step per node; each is re-checked there to be the same process first."""
        ctl, _ = self.running_job()
        hit: list[int] = []
        for node in sorted({w.node for w in workers}):
            specs = [f"{w.pid}:{w.create_time!r}" for w in workers if w.node == node]
            res = ctl.run(*self._step("signal", str(run.run_dir.resolve()), sig.name, *specs, node=node), check=False,
                          timeout=60, env=self._step_env())
            try:
                answer = json.loads(res.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise FaultError(f"signalling pid(s) {specs} on {node} failed (srun exit {res.returncode}): "
                                 f"{res.stderr.strip()[:300]}") from None
            hit += answer["hit"]
        return hit

    def signal_undo(self, run: RunContext, worker: Worker, signame: str) -> Command:
        """A ledger entry that sends ``signame`` to ``worker`` later (a SIGCONT after a SIGSTOP), while the job runs."""
        ctl, job_id = self.running_job()
        step = self._step("signal", str(run.run_dir.resolve()), signame, f"{worker.pid}:{worker.create_time!r}", node=worker.node)
        return Command(ctl.undo_argv("env", *(f"{k}={v}" for k, v in self._step_env().items()), *step),
                       only_if=ctl.undo_argv("sh", "-c", f"squeue -h -j {job_id} -t R 2>/dev/null | grep -q ."))

    def slow(self, run: RunContext, worker: Worker, stopped_s: float, running_s: float) -> "RemoteDutyCycle":
        """The straggler's duty cycle as a step on the worker's node, until ``stop()``."""
        ctl, _ = self.running_job()
        log = run.run_dir / f"straggler-{worker.node}-{worker.pid}.out"
        stop_file = log.with_suffix(".stop").resolve()
        argv = ctl.argv(*self._step("duty", str(run.run_dir.resolve()), f"{worker.pid}:{worker.create_time!r}",
                                    str(stopped_s), str(running_s), str(stop_file), node=worker.node))
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, env={**os.environ, **(ctl.env or {}), **self._step_env()}, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        run.ledger.push("target/procs", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        run.log("slurm_step", what="straggler", argv=argv, pid=proc.pid, node=worker.node)
        return RemoteDutyCycle(proc, log, stop_file)

    # ------------------------------------------------------------------------------- following the job

    def _drain_excluded(self, state: JobState) -> None:
        """Play the cluster's node health check: a GPU the workload's monitor excluded takes its node
        out of service (DRAIN, with the XID as the reason, as NHC or an operator would), and the
        job is requeued so Slurm starts it again without that node (a spare, or fewer nodes with
        min_nodes). The node is resumed when the run ends (the ledger)."""
        assert self.run is not None and self.control is not None and self.job_id is not None
        run, ctl = self.run, self.control
        path = exclusions_path(run.run_dir)
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return
        if stamp == self._exclusions_seen:
            return
        self._exclusions_seen = stamp
        job_nodes = set(ctl.hostnames(state.nodes)) if state.nodes else set()
        for entry in read_exclusions(path):
            node = str(entry.get("host") or "")
            if not node or node in self._drained or (self.local and node not in {n.name for n in self.nodes}):
                continue
            if not self.local and node not in job_nodes:
                continue  # never a node the run's job is not on
            self._drained.add(node)
            reason = f"XID {entry.get('code')} on GPU {entry.get('bus_id')} (chaos run {run_names(run).rid})"
            drained = f"scontrol show node -o {shlex.quote(node)} | grep -q DRAIN"
            run.ledger.push("target", Command(ctl.undo_argv("scontrol", "update", f"NodeName={node}", "State=RESUME"),
                                              only_if=ctl.undo_argv("sh", "-c", drained)))
            try:
                ctl.update_node(node, State="DRAIN", Reason=reason)
                requeue = state.running and node in job_nodes
                if requeue:
                    ctl.requeue(self.job_id)
            except FaultError as exc:
                # The job goes on without the drain: health_action then says the node was not drained.
                run.log("slurm_drain_failed", node=node, error=str(exc), job_id=self.job_id)
                continue
            run.log("slurm_drain", node=node, reason=reason, device=entry.get("device"), job_id=self.job_id,
                    requeued=requeue)

    def exit_code(self) -> int | None:
        """None while the job may still run (pending, running, requeued); then its exit status."""
        if self.control is None or self.job_id is None or self.run is None:
            return 1
        now = self.run.clock.mono()
        if now - self._asked < POLL_JOB_S and self.job is not None and not self.job.finished:
            return None
        self._asked = now
        state = self.control.job(self.job_id)
        if state is None:  # the controller did not answer this time: ask again next poll
            return None
        previous, self.job = self.job, state
        self._drain_excluded(state)
        if previous is None or state.summary() != previous.summary():
            self.run.log("slurm_job", **state.summary())
            if previous is not None and state.restarts > previous.restarts:
                self.run.log("slurm_requeue", job_id=state.job_id, restarts=state.restarts, reason=state.reason)
        return state.shell_exit_code() if state.finished else None


