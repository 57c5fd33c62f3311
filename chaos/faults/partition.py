"""Cut nodes off from each other (one node from the rest, or two groups; one way or both) with nftables drop rules."""

from __future__ import annotations

import shutil
from typing import Any, Literal

from pydantic import Field, field_validator

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.network import network_nodes, nft_add_table, nft_ruleset, run_names
from chaos.targets.base import Node
from chaos.targets.netns import require_root


class PartitionConfig(FaultConfig):
    nodes: list[int] = Field(min_length=1)
    """Node ranks on one side of the cut (a single number is one node from the rest)."""
    peers: list[int] | None = None
    """Node ranks on the other side; default every other node."""
    direction: Literal["both", "outbound", "inbound"] = "both"
    """both: nothing crosses; outbound: packets from ``nodes`` to ``peers`` are dropped; inbound: packets from ``peers`` to ``nodes``."""

    @field_validator("nodes", "peers", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value


def split(nodes: list[Node], side: list[int], peers: list[int] | None) -> tuple[list[Node], list[Node]]:
    """The two groups of a cut, validated against the nodes that exist."""
    by_rank = {n.rank: n for n in nodes}
    unknown = sorted(set(side) | set(peers or ()))
    missing = [r for r in unknown if r not in by_rank]
    if missing:
        raise FaultError(f"no node with rank {missing}; the run has nodes {sorted(by_rank)}")
    other = peers if peers is not None else [r for r in by_rank if r not in side]
    if set(side) & set(other):
        raise FaultError(f"a node cannot be on both sides of a partition: {sorted(set(side) & set(other))}")
    if not other:
        raise FaultError("nothing on the other side of the partition: name fewer nodes or give peers")
    return [by_rank[r] for r in side], [by_rank[r] for r in other]


class Partition(Fault, kind="partition"):
    """Cut nodes off from each other (one node from the rest, or two groups; one way or both) with nftables drop rules."""

    Config = PartitionConfig
    needs_target = ("netns", "docker", "slurm")

    def check(self, run: RunContext) -> None:
        require_root("partition fault")
        if shutil.which("nft") is None:
            raise CapabilityError("the partition fault needs nftables: apt-get install -y nftables")

    def rules(self, run: RunContext, side: list[Node], other: list[Node]) -> dict[str, str]:
        """nft script per node of ``side``, by node name."""
        c = self.config
        peers = [n.address or "" for n in other]
        table = run_names(run).nft_table(self.index)
        return {n.name: nft_ruleset(table, out_daddrs=peers if c.direction in ("both", "outbound") else (),
                                    in_saddrs=peers if c.direction in ("both", "inbound") else ())
                for n in side}

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"nft table {run_names(run).nft_table(self.index)} in nodes {c.nodes}: drop {c.direction} "
                f"traffic with nodes {c.peers if c.peers is not None else 'all others'}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        side, other = split(network_nodes(run), self.config.nodes, self.config.peers)
        table = run_names(run).nft_table(self.index)
        scripts = self.rules(run, side, other)
        for node in side:
            nft_add_table(run, self.owner, node, table, scripts[node.name])
        return {"nodes": [n.name for n in side], "peers": [n.name for n in other],
                "direction": self.config.direction, "nft_table": table, "mechanism": "nftables"}
