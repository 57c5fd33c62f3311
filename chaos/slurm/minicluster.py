"""A throwaway but real Slurm cluster for one run: munge, slurmctld, and one slurmd per node namespace.

Everything is the run's own, so parallel runs and a cluster the host may already run are never
touched: a munged with its own key and socket, a slurm.conf in the run directory (every client call
names it through SLURM_CONF), the controller on the run's bridge inside the switch namespace, and
each slurmd in its node's namespace under a subreaper (chaos/slurm/reaper.py) so a node's job steps
stay in its process tree. Each daemon's kill is in the ledger before it starts.

Measured on a 2-core Debian 12 box with slurm-wlm 22.05: all nodes idle ~1.3 s after the first
daemon starts (docs/slurm.md describes the cluster).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError
from chaos.runtime.launch import with_package
from chaos.slurm.control import SlurmControl
from chaos.runtime.undo import Command, KillTree, RemovePath

PARTITION = "chaos"
"""The partition the run's job is submitted to."""
URGENT_PARTITION = "chaos-urgent"
"""A higher-priority partition on the same nodes: a job there preempts the run's (the preempt fault)."""

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "srun", "sinfo")
"""What the local cluster needs on PATH (Debian: apt-get install -y slurm-wlm munge)."""


def state_root(rid: str) -> Path:
    """The directory the run owns for the cluster's state and sockets (``<it>/cluster``), outside the
    run directory: a unix socket path is limited to 107 bytes, and munged's socket and slurmd's
    step sockets would exceed it under a long --runs-dir."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path("/tmp")
    return base / f"chaos-{rid}-slurm"


@dataclass(frozen=True)
class ClusterNode:
    name: str
    address: str
    netns: str | None
    """The node's network namespace; None: the host's own network (a one-node cluster, see ``standalone``)."""


@dataclass(frozen=True)
class ClusterSpec:
    """What the slurm.conf of one run's cluster says; ``render`` is the file itself."""

    name: str
    controller_host: str
    controller_address: str
    nodes: tuple[ClusterNode, ...]
    state: Path
    logs: Path
    munge_socket: Path
    requeue_delay_s: int = 5
    slurmd_timeout_s: int = 10
    kill_wait_s: int = 5
    ctld_port: int = 6817
    slurmd_port: int = 6818
    """Slurm's default ports; a cluster on the host's own network takes free ones (two clusters there would clash)."""

    def render(self) -> str:
        lines = [
            "# Written by the chaos harness for one run; removed with it. Every daemon and client uses it",
            "# through -f / SLURM_CONF, never /etc/slurm.",
            f"ClusterName={self.name}",
            # slurmctld refuses to start unless SlurmctldHost is this host's own name.
            f"SlurmctldHost={self.controller_host}({self.controller_address})",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # cred_expire is also how long a requeued job is held before it may start again (Slurm's
            # default: 120 s); a staging cluster's own value is part of its requeue latency.
            f"AuthInfo=socket={self.munge_socket},cred_expire={self.requeue_delay_s}",
            # No cgroups: the nodes are namespaces on one host, and linuxproc tracks steps by parentage.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "PreemptType=preempt/partition_prio",
            "PreemptMode=REQUEUE",
            # Schedule a pending (requeued) job within a second instead of the next 30 s backfill pass.
            "SchedulerParameters=bf_interval=1,sched_min_interval=100000",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            f"SlurmdTimeout={self.slurmd_timeout_s}",
            f"KillWait={self.kill_wait_s}",
            "InactiveLimit=0",
            "MinJobAge=600",
            f"StateSaveLocation={self.state / 'ctld'}",
            f"SlurmdSpoolDir={self.state / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.state / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.state / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.logs / 'slurmctld.log'}",
            f"SlurmdLogFile={self.logs / 'slurmd-%n.log'}",
        ]
        for node in self.nodes:
            lines.append(f"NodeName={node.name} NodeAddr={node.address} NodeHostname={node.name} CPUs=1 State=UNKNOWN")
        # The job runs in `chaos`; a job in `chaos-urgent` (higher PriorityTier) preempts it the way a
        # production cluster's high-priority work does: SIGTERM, GraceTime, SIGKILL, requeue.
        lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1")
        lines.append(f"PartitionName={URGENT_PARTITION} Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2")
        return "\n".join(lines) + "\n"


def _enter(netns: str | None) -> tuple[str, ...]:
    # nsenter, not `ip netns exec`: that remounts /sys, and slurmd then finds no cgroup filesystem.
    return ("nsenter", f"--net=/run/netns/{netns}") if netns else ()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def standalone_spec(root: Path, name: str, node: str | None = None) -> ClusterSpec:
    """A one-node cluster on the host's own network (127.0.0.1, free ports), e.g. to stand in for a
    user's cluster in a test of ``cluster: existing``: nothing of it is a run's namespace."""
    host = os.uname().nodename
    return ClusterSpec(name=name, controller_host=host, controller_address="127.0.0.1",
                       nodes=(ClusterNode(node or host, "127.0.0.1", None),), state=root / "slurm" / "state",
                       logs=root / "logs",
                       munge_socket=root / "slurm" / "state" / "munge" / "munge.socket", ctld_port=free_port(),
                       slurmd_port=free_port())


def missing_commands() -> list[str]:
    return [c for c in DAEMONS if shutil.which(c) is None]


def daemon_env() -> dict[str, str]:
    """The harness's environment without the run's protocol variables: daemons are not workload processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAOS_")}
    env["PYTHONPATH"] = with_package(env.get("PYTHONPATH"))
    return env


class MiniCluster:
    """Brings up and (through the ledger) tears down one run's cluster."""

    def __init__(self, run: RunContext, spec: ClusterSpec, conf: Path, switch_ns: str | None) -> None:
        self.run = run
        self.spec = spec
        self.conf = conf
        self.switch_ns = switch_ns
        self.control = SlurmControl(run.shell, conf=str(conf), prefix=_enter(switch_ns))
        self.node_pids: dict[str, int] = {}

    def plan(self) -> list[str]:
        s = self.spec
        lines = [f"slurm: write {self.conf} (cluster {s.name}, controller {s.controller_address}, "
                 f"{len(s.nodes)} node(s)); state and sockets in {s.state}",
                 f"slurm: munged -F -f --socket={s.munge_socket} --key-file={s.state / 'munge' / 'munge.key'}",
                 f"slurm: {shlex.join([*_enter(self.switch_ns), 'slurmctld', '-D', '-f', str(self.conf)])}"]
        lines += [f"slurm: {shlex.join([*_enter(n.netns), sys.executable, '-m', 'chaos.slurm.reaper'])} "
                  f"slurmd -D -f {self.conf} -N {n.name}" for n in s.nodes]
        return lines

    def _spawn(self, argv: list[str], log: Path, what: str) -> subprocess.Popen:
        out = open(log, "ab")
        try:
            proc = subprocess.Popen(argv, env={**daemon_env(), "SLURM_CONF": str(self.conf)}, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        self.run.ledger.push("target", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        self.run.log("slurm_daemon", what=what, pid=proc.pid, argv=argv)
        return proc

    def start(self, timeout_s: float = 30.0) -> None:
        s = self.spec
        t0 = time.monotonic()
        # Pushed before they exist: whatever fails below, teardown removes the sockets and state.
        # The owned directory itself is a root of the run's scope, which RemovePath never deletes:
        # its (then empty) self goes with rmdir.
        self.run.ledger.push("target", Command(["rmdir", str(s.state.parent)],
                                               only_if=["test", "-d", str(s.state.parent)]))
        self.run.ledger.push("target", RemovePath(path=str(s.state)))
        (s.state / "munge").mkdir(parents=True, mode=0o700)
        (s.state / "spool").mkdir()
        (s.state / "ctld").mkdir()
        s.logs.mkdir(parents=True, exist_ok=True)
        key = s.state / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(s.render())
        procs = [self._spawn(["munged", "-F", "-f", f"--socket={s.munge_socket}", f"--key-file={key}",
                              f"--pid-file={s.state / 'munge' / 'munged.pid'}",
                              f"--seed-file={s.state / 'munge' / 'munged.seed'}",
                              f"--log-file={s.logs / 'munged.log'}"], s.logs / "munged.out", "munged")]
        self._wait(lambda: s.munge_socket.exists(), 10, "munged did not create its socket", procs)
        procs.append(self._spawn([*_enter(self.switch_ns), "slurmctld", "-D", "-f", str(self.conf)],
                                 s.logs / "slurmctld.out", "slurmctld"))
        for node in s.nodes:
            p = self._spawn([*_enter(node.netns), sys.executable, "-m", "chaos.slurm.reaper",
                             "slurmd", "-D", "-f", str(self.conf), "-N", node.name],
                            s.logs / f"slurmd-{node.name}.out", f"slurmd {node.name}")
            self.node_pids[node.name] = p.pid
            procs.append(p)
        self._wait(self._all_idle, timeout_s, "the Slurm nodes did not come up idle", procs)
        self.run.log("slurm_cluster_up", seconds=round(time.monotonic() - t0, 3), conf=str(self.conf),
                     nodes=[n.name for n in s.nodes], controller=s.controller_address)

    def _all_idle(self) -> bool:
        nodes = self.control.nodes()
        return len(nodes) == len(self.spec.nodes) and all(
            rec.get("State", "").split("+")[0] == "IDLE" for rec in nodes.values())

    def _wait(self, ready, timeout_s: float, what: str, procs: list[subprocess.Popen]) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.1)
        detail = "; ".join(f"{' '.join(map(str, p.args[:4]))} exited {p.returncode}" for p in procs
                           if p.poll() is not None)
        raise CapabilityError(f"{what} within {timeout_s:g} s{': ' + detail if detail else ''}. "
                              f"Logs: {self.spec.logs} (slurmctld.log, slurmd-*.log, munged.log); "
                              f"check 'chaos doctor' for the slurm probe")
