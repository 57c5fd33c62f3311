"""Target ``netns``: N nodes on this host, each a network namespace with its own address on a bridge the run creates."""

from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import subprocess
import psutil
from pydantic import Field, model_validator

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError
from chaos.runtime.launch import Rendezvous, workload_argv, workload_cwd, workload_env
from chaos.runtime.network import node_address, pick_subnet, run_names, used_networks
from chaos.targets.base import Node, Target, TargetConfig
from chaos.runtime.undo import Command, KillTree


class NetnsConfig(TargetConfig):
    nodes: int = Field(default=2, ge=2, le=32)
    """Nodes (network namespaces), one torchrun agent each."""
    min_nodes: int | None = Field(default=None, ge=1)
    """Elastic: torchrun --nnodes MIN:MAX with MIN=min_nodes, MAX=nodes; a lost node shrinks the job instead of failing it."""
    rdzv_port: int = Field(default=29400, ge=1024, le=65535)
    """c10d rendezvous port on node 0 (each run has its own namespaces, so runs never share it)."""
    last_call_timeout_s: int = Field(default=2, ge=1, le=600)
    """Elastic: how long a re-rendezvous waits for more nodes once min_nodes are there (torch default: 30 s)."""
    keep_alive_interval_s: int = Field(default=1, ge=1, le=60)
    """Rendezvous heartbeat period; a node missing 3 heartbeats is dropped from the next round (torch default: 5 s)."""

    @model_validator(mode="after")
    def _min_not_above_max(self) -> "NetnsConfig":
        if self.min_nodes is not None and self.min_nodes > self.nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) must not exceed nodes ({self.nodes})")
        return self


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise CapabilityError(f"the {what} needs root (network namespaces, veth links, nftables, tc): "
                              f"run as root (sudo -E chaos run ...) or in CI (ci/install-node-tools.sh)")


def nnodes_arg(nodes: int, min_nodes: int | None) -> str:
    """torchrun's --nnodes: fixed ``N`` or elastic ``MIN:MAX``."""
    return str(nodes) if min_nodes is None or min_nodes == nodes else f"{min_nodes}:{nodes}"


def surviving_exit_code(nodes: list[Node]) -> int | None:
    """None while a node the job still counts on runs; then its first non-zero code, or 0.

    A node a fault killed on purpose (``info["lost"]``) does not decide the job's result: an elastic
    job is expected to go on without it, and a fixed-size one fails on the survivors' exit codes.
    """
    live = [n for n in nodes if not n.info.get("lost")] or nodes
    codes = [n.poll() for n in live]
    if any(c is None for c in codes):
        return None
    return next((c for c in codes if c != 0), 0)


class Netns(Target, kind="netns"):
    """N nodes on this host, each a network namespace on a private bridge, one torchrun agent per node (needs root)."""

    Config = NetnsConfig

    @property
    def node_count(self) -> int:
        return self.config.nodes

    @property
    def namespace_count(self) -> int:
        """Node namespaces to create: the job's nodes (a scheduler target adds spares)."""
        return self.config.nodes

    def check(self, run: RunContext) -> None:
        super().check(run)
        require_root("netns target")
        for tool in ("ip", "nsenter"):
            if shutil.which(tool) is None:
                raise CapabilityError(f"'{tool}' is not installed: apt-get install -y iproute2 util-linux")

    def _addressing(self, run: RunContext) -> ipaddress.IPv4Network:
        if run.subnet is None:
            used = run.shell.run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
            used += run.shell.run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
            run.subnet = pick_subnet(run_names(run).rid, used_networks(used))
        return run.subnet

    def _setup_commands(self, run: RunContext) -> list[tuple[list[str], Command]]:
        """(command, its undo) in creation order: the switch namespace and bridge, then each node."""
        n = run_names(run)
        sw = n.switch_ns
        steps: list[tuple[list[str], Command]] = [
            (["ip", "netns", "add", sw], Command(["ip", "netns", "del", sw], only_if=["test", "-e", f"/run/netns/{sw}"])),
            (["ip", "-n", sw, "link", "add", n.bridge, "type", "bridge"],
             Command(["ip", "-n", sw, "link", "del", n.bridge], only_if=["ip", "-n", sw, "link", "show", n.bridge])),
        ]
        for k in range(self.namespace_count):
            ns, nif, sif = n.node_ns(k), n.node_if(k), n.switch_if(k)
            steps.append((["ip", "netns", "add", ns],
                          Command(["ip", "netns", "del", ns], only_if=["test", "-e", f"/run/netns/{ns}"])))
            # Deleting the switch end removes its peer too.
            steps.append((["ip", "-n", sw, "link", "add", sif, "type", "veth", "peer", "name", nif, "netns", ns],
                          Command(["ip", "-n", sw, "link", "del", sif], only_if=["ip", "-n", sw, "link", "show", sif])))
        return steps

    def _config_commands(self, run: RunContext) -> list[list[str]]:
        """Addresses and links up: nothing to undo beyond deleting what ``_setup_commands`` made."""
        n = run_names(run)
        subnet = self._addressing(run)
        sw = n.switch_ns
        cmds = [["ip", "-n", sw, "link", "set", "lo", "up"], ["ip", "-n", sw, "link", "set", n.bridge, "up"]]
        for k in range(self.namespace_count):
            ns, nif, sif = n.node_ns(k), n.node_if(k), n.switch_if(k)
            cmds += [["ip", "-n", sw, "link", "set", sif, "master", n.bridge],
                     ["ip", "-n", sw, "link", "set", sif, "up"],
                     ["ip", "-n", ns, "addr", "add", f"{node_address(subnet, k)}/{subnet.prefixlen}", "dev", nif],
                     ["ip", "-n", ns, "link", "set", nif, "up"],
                     ["ip", "-n", ns, "link", "set", "lo", "up"]]
        return cmds

    def plan(self, run: RunContext) -> list[str]:
        lines = [f"netns: {shlex.join(cmd)}   (undo: {undo.describe()})" for cmd, undo in self._setup_commands(run)]
        lines += [f"netns: {shlex.join(cmd)}" for cmd in self._config_commands(run)]
        lines += [f"launch node {node.name}: {shlex.join(self._argv(run, node))}" for node in self._nodes(run)]
        return lines

    def _nodes(self, run: RunContext) -> list[Node]:
        n = run_names(run)
        subnet = self._addressing(run)
        return [Node(name=f"node{k}", rank=k, address=node_address(subnet, k),
                     info={"netns": n.node_ns(k), "ifname": n.node_if(k), "switch_if": n.switch_if(k),
                           "net_exec": ["ip", "netns", "exec", n.node_ns(k)]})
                for k in range(self.namespace_count)]

    def prepare(self, run: RunContext) -> None:
        for cmd, undo in self._setup_commands(run):
            run.ledger.push("target", undo)
            run.shell.run(cmd)
        for cmd in self._config_commands(run):
            run.shell.run(cmd)
        self.nodes = self._nodes(run)
        run.log("nodes", target="netns", subnet=str(self._addressing(run)),
                nodes=[{"name": x.name, "address": x.address, **x.info} for x in self.nodes])

    def rendezvous(self, run: RunContext, node: Node) -> Rendezvous:
        c = self.config
        return Rendezvous(
            # Node 0's address from the addressing plan: also right before prepare() (--dry-run).
            standalone=False, host=node_address(self._addressing(run), 0), port=c.rdzv_port,
            nnodes=nnodes_arg(c.nodes, c.min_nodes), node_rank=node.rank, run_id=f"chaos-{run_names(run).rid}",
            local_addr=node.address,
            # Node 0 serves the store: torch's guess compares the endpoint with the host's name, which
            # resolves to the host's address, not the namespace's.
            rdzv_conf={"is_host": "true" if node.rank == 0 else "false",
                       "last_call_timeout": str(c.last_call_timeout_s),
                       "keep_alive_interval": str(c.keep_alive_interval_s)})

    def _argv(self, run: RunContext, node: Node) -> list[str]:
        return [*node.info["net_exec"], *workload_argv(run, self.rendezvous(run, node))]

    def launch(self, run: RunContext) -> list[Node]:
        for node in self.nodes:
            env = workload_env(run, node.name)
            # gloo picks its interface from the hostname otherwise, which resolves outside the namespace.
            env["GLOO_SOCKET_IFNAME"] = node.info["ifname"]
            out = open(run.run_dir / "output.log", "ab")
            proc = subprocess.Popen(self._argv(run, node), env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=workload_cwd(run))
            out.close()
            # `ip netns exec` execs the command, so this pid is the torchrun agent itself.
            run.ledger.push("target/procs", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
            run.tree.add_root(node.name, proc.pid)
            node.proc = proc
            run.log("node_launch", node=node.name, pid=proc.pid, address=node.address)
        return self.nodes

    def exit_code(self) -> int | None:
        return surviving_exit_code(self.nodes)
