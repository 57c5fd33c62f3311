"""Target ``torchft``: replica groups on this host, each its own torchrun job, around a torchft lighthouse.

torchft (drop-replica recovery) runs a job as several replica groups that a lighthouse gathers into a
quorum at every step: a group that dies is left out and the others train on; one that comes back heals
from a live peer and rejoins. Each group is a torchrun job of ``workload.nproc_per_node`` processes with
``REPLICA_GROUP_ID`` and ``NUM_REPLICA_GROUPS`` in its environment (a node of the run named ``rg<k>``,
so a fault names the group it strikes with ``node: rg1``); the lighthouse is part of the run, started
before the groups and stopped with them, on loopback.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
from pydantic import Field

from chaos.errors import CapabilityError, FaultError, HarnessError
from chaos.instep.command import RANK_BASE_ENV
from chaos.runtime.context import RunContext
from chaos.spec import interpreter
from chaos.runtime.launch import Rendezvous, workload_argv, workload_cwd, workload_env
from chaos.runtime.undo import KillTree
from chaos.targets.base import Node, Target, TargetConfig
from chaos.targets.netns import surviving_exit_code

LIGHTHOUSE = "torchft_lighthouse"
READY_S = 15.0
"""How long the lighthouse may take to listen before the run gives up on it."""


class TorchftConfig(TargetConfig):
    replica_groups: int = Field(default=2, ge=1)
    """Replica groups, each one torchrun job on this host of workload.nproc_per_node processes (nodes rg0, rg1, ...)."""
    heartbeat_timeout_ms: int = Field(default=2000, ge=100)
    """The lighthouse keeps a silent group in the quorum this long: the pause the survivors take when one dies."""
    min_replicas: int = Field(default=1, ge=1)
    """The fewest groups a quorum may have: 1 lets a single survivor train on."""
    quorum_tick_ms: int = Field(default=100, ge=10)
    """How often the lighthouse decides a quorum."""
    join_timeout_ms: int = Field(default=10000, ge=100)
    """How long a quorum waits for the groups that heartbeat but have not joined yet."""

    def node_count(self) -> int:
        return self.replica_groups


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lighthouse_binary(python: str | None = None) -> str | None:
    """The ``torchft_lighthouse`` of the harness's environment (the torchft extra installs it), or with ``python``
    (a workload.python) only the one of that environment: a lighthouse of another torchft version than the
    replicas' would be judged with them."""
    beside = Path(python or sys.executable).parent / LIGHTHOUSE
    if beside.is_file():
        return str(beside)
    return None if python else shutil.which(LIGHTHOUSE)


class Torchft(Target, kind="torchft"):
    """torchft replica groups on this host (one torchrun job each) and the lighthouse that forms their quorum."""

    Config = TorchftConfig
    independent_worlds = True

    def __init__(self, config: TorchftConfig) -> None:
        super().__init__(config)
        self.port = 0
        self.relaunches = 0
        self.stopping = False

    @property
    def node_count(self) -> int:
        return self.config.replica_groups

    def check(self, run: RunContext) -> None:
        super().check(run)
        python = run.experiment.workload.python and interpreter.workload_python(run.experiment)
        if lighthouse_binary(python) is None:
            if python:
                raise CapabilityError(f"target torchft: the workload's environment ({python}) has no {LIGHTHOUSE}: "
                                      f"{python} -m pip install torchft (the lighthouse must be the replicas' version)")
            raise CapabilityError(f"target torchft needs torchft's {LIGHTHOUSE}, which is not installed: "
                                  f'pip install -e ".[torchft]" (torchft-nightly; scripts/setup.sh installs it)')

    def _lighthouse_argv(self, run: RunContext) -> list[str]:
        c = self.config
        python = run.experiment.workload.python and interpreter.workload_python(run.experiment)
        return [lighthouse_binary(python) or LIGHTHOUSE, "--min_replicas", str(c.min_replicas),
                "--quorum_tick_ms", str(c.quorum_tick_ms), "--join_timeout_ms", str(c.join_timeout_ms),
                "--heartbeat_timeout_ms", str(c.heartbeat_timeout_ms), "--bind", f"127.0.0.1:{self.port or 0}"]

    def _argv(self, run: RunContext) -> list[str]:
        return workload_argv(run, Rendezvous(standalone=True))

    def plan(self, run: RunContext) -> list[str]:
        lines = [f"lighthouse: {shlex.join(self._lighthouse_argv(run))}"]
        lines += [f"launch replica group rg{g}: REPLICA_GROUP_ID={g} NUM_REPLICA_GROUPS={self.config.replica_groups} "
                  f"{shlex.join(self._argv(run))}" for g in range(self.config.replica_groups)]
        return lines

    def prepare(self, run: RunContext) -> None:
        self.port = _free_port()
        log_path = run.run_dir / "lighthouse.log"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(self._lighthouse_argv(run), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        run.ledger.push("target", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        deadline = time.monotonic() + READY_S
        while True:
            if proc.poll() is not None:
                raise HarnessError(f"torchft's lighthouse exited ({proc.returncode}) before it listened on "
                                   f"127.0.0.1:{self.port}; its log: {log_path}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise HarnessError(f"torchft's lighthouse did not listen on 127.0.0.1:{self.port} within "
                                       f"{READY_S:.0f} s; its log: {log_path}") from None
                time.sleep(0.1)
        run.log("lighthouse", pid=proc.pid, address=f"http://127.0.0.1:{self.port}",
                heartbeat_timeout_ms=self.config.heartbeat_timeout_ms, min_replicas=self.config.min_replicas)

    def launch(self, run: RunContext) -> list[Node]:
        run.tree.independent_nodes = True  # a group restarts alone: its new worker is no new round of the others
        self.nodes = [Node(name=f"rg{g}", rank=g) for g in range(self.config.replica_groups)]
        for node in self.nodes:
            self._start(run, node, run.launch_no)
        return self.nodes

    def _start(self, run: RunContext, node: Node, launch_no: int) -> None:
        env = workload_env(run, node.name)
        env.update({"REPLICA_GROUP_ID": str(node.rank), "NUM_REPLICA_GROUPS": str(self.config.replica_groups),
                    "TORCHFT_LIGHTHOUSE": f"http://127.0.0.1:{self.port}", "CHAOS_LAUNCH": str(launch_no),
                    # An in-step fault's rank counts the groups' ranks one after another (chaos.instep.command).
                    RANK_BASE_ENV: str(node.rank * run.experiment.workload.nproc_per_node),
                    # Loopback for the replicas' gloo group: the host's name may resolve elsewhere.
                    "GLOO_SOCKET_IFNAME": "lo"})
        # Each group is a single-node job whose Manager is a client of the store torchrun's agent shares at
        # MASTER_PORT; the fresh-store-per-attempt setting of multi-node targets would leave it none to reach.
        if "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in run.experiment.workload.env:
            env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        out = open(run.run_dir / "output.log", "ab")
        proc = subprocess.Popen(self._argv(run), env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=workload_cwd(run))
        out.close()
        run.ledger.push("target/procs", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        run.tree.add_root(node.name, proc.pid)
        node.proc = proc
        run.log("node_launch", node=node.name, pid=proc.pid, replica_group=node.rank, launch=launch_no)

    def take_down(self, run: RunContext, group: int, sig: int, *, returning: bool) -> list[int]:
        """Signal every process of replica group ``group`` (its agent and workers) at once; ``returning``: the
        job waits for ``bring_back`` before it can end (a group that comes back after its peers finished)."""
        node = self._node(group)
        procs = [p for name, p in run.tree.processes() if name == node.name]
        if not procs:
            raise FaultError(f"replica group rg{group} has no live process left to take down")
        # Marked before acting: its exit code is the fault's doing, not the job's verdict.
        node.info["lost"] = True
        node.info["returning"] = returning
        pids = []
        for p in procs:
            try:
                p.send_signal(sig)
                pids.append(p.pid)
            except psutil.NoSuchProcess:
                continue
        return pids

    def bring_back(self, run: RunContext, group: int) -> int | None:
        """Start replica group ``group`` again as a new torchrun job (a new launch number: its restart count starts
        over); None when the run is being stopped (nothing comes back then)."""
        node = self._node(group)
        node.info["returning"] = False
        if self.stopping:
            return None
        if node.proc is not None and node.proc.poll() is None:
            node.proc.wait(timeout=10)  # the agent the fault killed is still being reaped
        self.relaunches += 1
        node.info["lost"] = False
        self._start(run, node, run.launch_no + self.relaunches)
        return node.proc.pid if node.proc is not None else None

    def _node(self, group: int) -> Node:
        node = next((n for n in self.nodes if n.rank == group), None)
        if node is None:
            raise FaultError(f"no replica group rg{group}; the run has {', '.join(n.name for n in self.nodes)}")
        return node

    def exit_code(self) -> int | None:
        if any(n.info.get("returning") for n in self.nodes):
            return None  # a group taken down for a while is still to come back: the job is not over
        return surviving_exit_code(self.nodes)

    def stop(self, run: RunContext) -> None:
        self.stopping = True
        super().stop(run)
