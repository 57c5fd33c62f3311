"""The run's own network: names and addresses derived from the run, netem detection, and the tc/nft command lines faults use."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from chaos.errors import CapabilityError
from chaos.runtime.undo import Command

if TYPE_CHECKING:
    from chaos.runtime.context import RunContext
    from chaos.runtime.node import Node

IFNAMSIZ = 15
"""Linux interface names are at most 15 bytes; every name below is built to fit."""

_MISSING_QDISC = "Specified qdisc kind is unknown"


def short_id(run_dir: Path) -> str:
    """Six hex digits naming everything a run creates on the host (namespaces, links, tables, containers)."""
    return hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:6]


def run_short_id(run: "RunContext") -> str:
    return short_id(run.run_dir)


@dataclass(frozen=True)
class RunNames:
    """Every kernel object name of one run. Parallel runs differ in ``rid``, so they never collide."""

    rid: str

    @property
    def switch_ns(self) -> str:
        """The namespace that holds the bridge: none of the run's traffic touches the host's own namespace."""
        return f"chaos-{self.rid}-sw"

    @property
    def bridge(self) -> str:
        return f"chb{self.rid}"

    def node_ns(self, k: int) -> str:
        return f"chaos-{self.rid}-n{k}"

    def node_if(self, k: int) -> str:
        """The node's interface (inside its namespace); also GLOO_SOCKET_IFNAME."""
        return f"chn{self.rid}n{k}"

    def switch_if(self, k: int) -> str:
        """The bridge port of node ``k`` (inside the switch namespace)."""
        return f"chs{self.rid}n{k}"

    def nft_table(self, fault_index: int) -> str:
        """One table per fault, so reverting one fault never touches another's rules."""
        return f"chaos_{self.rid}_f{fault_index}"

    @property
    def qdisc_handle(self) -> str:
        """A root qdisc handle of our own: ``tc qdisc del ... handle`` refuses to delete anyone else's."""
        return f"{int(self.rid[:4], 16) % 0xFFFE + 1:x}:"

    @property
    def docker_network(self) -> str:
        return f"chaos-{self.rid}"

    def container(self, k: int) -> str:
        return f"chaos-{self.rid}-n{k}"

    @property
    def prefix(self) -> str:
        """What every name of this run contains (for no_orphans)."""
        return self.rid


def run_names(run: "RunContext") -> RunNames:
    return RunNames(run_short_id(run))


def used_networks(route_text: str) -> list[ipaddress.IPv4Network]:
    """IPv4 prefixes in ``ip -4 route show table all`` / ``ip -4 -o addr`` output."""
    nets = []
    for token in re.findall(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b", route_text):
        try:
            nets.append(ipaddress.ip_network(token, strict=False))
        except ValueError:
            continue
    return [n for n in nets if n.prefixlen > 0]


def pick_subnet(rid: str, used: Sequence[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    """A private /24 derived from the run id that overlaps no route or address on this host."""
    seed = int(hashlib.sha1(rid.encode()).hexdigest(), 16)
    for i in range(4096):
        n = (seed + i * 7919) % (56 * 256)
        net = ipaddress.ip_network(f"10.{200 + n // 256}.{n % 256}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise CapabilityError("no free private /24 under 10.200.0.0/13 on this host; remove unused routes")


def node_address(subnet: ipaddress.IPv4Network, k: int) -> str:
    return str(subnet.network_address + 10 + k)


# ---------------------------------------------------------------------------- netem detection


def has_netem(run: "RunContext") -> bool:
    """Can this kernel run ``tc netem``? Probed once per run on a dummy link in a namespace we own."""
    if run.netem is not None:
        return run.netem
    names = run_names(run)
    ns = f"chaos-{names.rid}-probe"
    run.ledger.push("network/probe", Command(["ip", "netns", "del", ns], only_if=["test", "-e", f"/run/netns/{ns}"]))
    try:
        run.shell.run(["ip", "netns", "add", ns])
        # veth, not dummy: some kernels (this one) lack the dummy module.
        run.shell.run(["ip", "-n", ns, "link", "add", "chprobe0", "type", "veth", "peer", "name", "chprobe1"])
        res = run.shell.run(["tc", "-n", ns, "qdisc", "add", "dev", "chprobe0", "root", "netem", "delay", "1ms"],
                            check=False)
    finally:
        run.ledger.revert(run.shell, owner="network/probe")
    ok = res.ok
    detail = "tc netem works" if ok else (
        "sch_netem missing (" + (res.stderr.strip() or f"exit {res.rc}") + "): falling back to nftables for "
        "partition and loss, tbf for bandwidth; delay, jitter, corrupt, duplicate and reorder are refused")
    if not ok and _MISSING_QDISC not in res.stderr and not run.dry_run:
        detail += " (unexpected error: not the usual 'qdisc kind is unknown')"
    run.netem = ok
    run.log("capability", what="netem", available=ok, detail=detail)
    return ok


# ---------------------------------------------------------------------------- command lines


def in_node(node: "Node", argv: list[str]) -> list[str]:
    """``argv`` run inside the node's network namespace (netns: ip netns exec; docker: nsenter)."""
    return [*node.info["net_exec"], *argv]


def netem_args(*, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0, corrupt_pct: float = 0,
               duplicate_pct: float = 0, reorder_pct: float = 0, rate_mbit: float | None = None) -> list[str]:
    """The ``netem`` options for a degradation (reorder needs a delay to have anything to reorder)."""
    args: list[str] = []
    if delay_ms or jitter_ms or reorder_pct:
        args += ["delay", f"{delay_ms:g}ms"]
        if jitter_ms:
            args += [f"{jitter_ms:g}ms"]
    if loss_pct:
        args += ["loss", f"{loss_pct:g}%"]
    if corrupt_pct:
        args += ["corrupt", f"{corrupt_pct:g}%"]
    if duplicate_pct:
        args += ["duplicate", f"{duplicate_pct:g}%"]
    if reorder_pct:
        args += ["reorder", f"{reorder_pct:g}%"]
    if rate_mbit:
        args += ["rate", f"{rate_mbit:g}mbit"]
    return args


def tbf_args(rate_mbit: float) -> list[str]:
    """A token bucket: ``burst`` at least one MTU-sized frame per 1 ms tick, and 100 ms of queue."""
    burst_bytes = max(1600, int(rate_mbit * 1e6 / 8 / 1000))
    return ["tbf", "rate", f"{rate_mbit:g}mbit", "burst", str(burst_bytes), "latency", "100ms"]


def qdisc_add(ifname: str, handle: str, qdisc: list[str]) -> list[str]:
    """``add`` (not ``replace``): fails rather than overwrite a root qdisc someone else installed."""
    return ["tc", "qdisc", "add", "dev", ifname, "root", "handle", handle, *qdisc]


def qdisc_del(ifname: str, handle: str) -> list[str]:
    """The kernel checks ``handle``: this deletes our root qdisc or nothing."""
    return ["tc", "qdisc", "del", "dev", ifname, "root", "handle", handle]


def qdisc_probe(prefix: list[str], ifname: str, handle: str) -> list[str]:
    """Succeeds only while our qdisc is the root one (the ``only_if`` that makes its removal idempotent)."""
    inner = shlex.join([*prefix, "tc", "qdisc", "show", "dev", ifname, "root"])
    return ["sh", "-c", f"{inner} 2>/dev/null | grep -q ' {handle} root'"]


def nft_ruleset(table: str, *, out_daddrs: Sequence[str] = (), in_saddrs: Sequence[str] = (),
                loss_pct: float | None = None) -> str:
    """An ``nft -f`` script: drop (all, or ``loss_pct`` percent at random) of traffic to/from these peers."""
    # Per mille, so fractional percentages (0.5 %) survive nft's integer comparison.
    # 100 % is a plain drop: nft rejects "< 1000" as out of numgen's range.
    per_mille = 1000 if loss_pct is None else int(round(loss_pct * 10))
    verdict = "drop" if per_mille >= 1000 else f"numgen random mod 1000 < {per_mille} drop"
    lines = [f"table inet {table} {{"]
    if out_daddrs:
        lines += ["  chain out {", "    type filter hook output priority -10; policy accept;",
                  f"    ip daddr {{ {', '.join(out_daddrs)} }} {verdict}", "  }"]
    if in_saddrs:
        lines += ["  chain in {", "    type filter hook input priority -10; policy accept;",
                  f"    ip saddr {{ {', '.join(in_saddrs)} }} {verdict}", "  }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def nft_add_table(run: "RunContext", owner: str, node: "Node", table: str, script: str) -> None:
    """Install ``script`` in the node's namespace, its ``delete table`` registered first."""
    probe = in_node(node, ["nft", "list", "table", "inet", table])
    run.ledger.push(owner, Command(in_node(node, ["nft", "delete", "table", "inet", table]), only_if=probe))
    run.shell.run(in_node(node, ["nft", "-f", "-"]), input=script)


def add_root_qdisc(run: "RunContext", owner: str, node: "Node", handle: str, qdisc: list[str]) -> None:
    """Install a root qdisc on the node's interface, its removal registered first."""
    ifname = node.info["ifname"]
    run.ledger.push(owner, Command(in_node(node, qdisc_del(ifname, handle)),
                                   only_if=qdisc_probe(node.info["net_exec"], ifname, handle)))
    run.shell.run(in_node(node, qdisc_add(ifname, handle, qdisc)))


def network_nodes(run: "RunContext") -> list["Node"]:
    """The run's nodes that have their own network namespace; CapabilityError on a target without one."""
    nodes = [n for n in (run.target.nodes if run.target else []) if "net_exec" in n.info]
    if not nodes:
        raise CapabilityError("network faults need nodes with their own addresses: use target netns or docker")
    return nodes
