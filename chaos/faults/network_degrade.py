"""Degrade a node's link: delay, jitter, loss, corruption, duplication, reordering, bandwidth (tc netem; nftables/tbf without it)."""

from __future__ import annotations

import shutil
from typing import Any

from pydantic import Field, field_validator, model_validator

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.network import (add_root_qdisc, has_netem, netem_args, network_nodes, nft_add_table, nft_ruleset,
                           run_names, tbf_args)
from chaos.targets.base import Node
from chaos.targets.netns import require_root

NETEM_ONLY = ("delay_ms", "jitter_ms", "corrupt_pct", "duplicate_pct", "reorder_pct")
"""What nothing but netem can emulate: refused on kernels without sch_netem, never silently skipped."""


class NetworkDegradeConfig(FaultConfig):
    nodes: list[int] = Field(min_length=1)
    """Node ranks whose outgoing traffic is degraded (a single number is one node)."""
    delay_ms: float = Field(default=0, ge=0, le=60_000)
    """Added one-way delay (netem only)."""
    jitter_ms: float = Field(default=0, ge=0, le=60_000)
    """Random variation of the delay (netem only)."""
    loss_pct: float = Field(default=0, ge=0, le=100)
    """Packets dropped at random, percent (netem, or nftables numgen without it)."""
    corrupt_pct: float = Field(default=0, ge=0, le=100)
    """Packets with a flipped bit, percent (netem only)."""
    duplicate_pct: float = Field(default=0, ge=0, le=100)
    """Packets sent twice, percent (netem only)."""
    reorder_pct: float = Field(default=0, ge=0, le=100)
    """Packets sent ahead of the delayed rest, percent (netem only; needs delay_ms)."""
    rate_mbit: float | None = Field(default=None, gt=0, le=100_000)
    """Bandwidth cap in Mbit/s (netem rate, or a tbf qdisc without netem)."""

    @field_validator("nodes", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value

    @model_validator(mode="after")
    def _something_to_do(self) -> "NetworkDegradeConfig":
        if not any([self.delay_ms, self.jitter_ms, self.loss_pct, self.corrupt_pct, self.duplicate_pct,
                    self.reorder_pct, self.rate_mbit]):
            raise ValueError("give at least one of delay_ms, jitter_ms, loss_pct, corrupt_pct, duplicate_pct, "
                             "reorder_pct, rate_mbit")
        if self.reorder_pct and not self.delay_ms:
            raise ValueError("reorder_pct needs delay_ms: netem reorders by sending some packets without the delay")
        return self

    def netem_only(self) -> list[str]:
        return [name for name in NETEM_ONLY if getattr(self, name)]


class NetworkDegrade(Fault, kind="network-degrade"):
    """Degrade a node's link: delay, jitter, loss, corruption, duplication, reordering, bandwidth (tc netem; nftables/tbf without it)."""

    Config = NetworkDegradeConfig
    needs_target = ("netns", "docker", "slurm")

    def check(self, run: RunContext) -> None:
        require_root("network-degrade fault")
        for tool, pkg in (("tc", "iproute2"), ("nft", "nftables")):
            if shutil.which(tool) is None:
                raise CapabilityError(f"network-degrade needs '{tool}': apt-get install -y {pkg}")
        wanted = self.config.netem_only()
        if wanted and not has_netem(run):
            raise CapabilityError(
                f"{', '.join(wanted)} need tc netem, and this kernel has no sch_netem ('Specified qdisc kind is "
                f"unknown'); load it (modprobe sch_netem, or install linux-modules-extra-$(uname -r)) or use only "
                f"loss_pct and rate_mbit, which fall back to nftables and tbf")

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        args = netem_args(delay_ms=c.delay_ms, jitter_ms=c.jitter_ms, loss_pct=c.loss_pct, corrupt_pct=c.corrupt_pct,
                          duplicate_pct=c.duplicate_pct, reorder_pct=c.reorder_pct, rate_mbit=c.rate_mbit)
        return [f"nodes {c.nodes}: tc qdisc add dev <node if> root netem {' '.join(args)} "
                f"(without netem: nft numgen drop for loss, tbf for rate)"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        nodes = network_nodes(run)
        by_rank = {n.rank: n for n in nodes}
        missing = [r for r in c.nodes if r not in by_rank]
        if missing:
            raise FaultError(f"no node with rank {missing}; the run has nodes {sorted(by_rank)}")
        handle = run_names(run).qdisc_handle
        netem = has_netem(run)
        for rank in c.nodes:
            node = by_rank[rank]
            if netem:
                add_root_qdisc(run, self.owner, node, handle, ["netem", *netem_args(
                    delay_ms=c.delay_ms, jitter_ms=c.jitter_ms, loss_pct=c.loss_pct, corrupt_pct=c.corrupt_pct,
                    duplicate_pct=c.duplicate_pct, reorder_pct=c.reorder_pct, rate_mbit=c.rate_mbit)])
                continue
            if c.loss_pct:
                self._drop_some(run, node, [n for n in nodes if n.rank != rank])
            if c.rate_mbit:
                add_root_qdisc(run, self.owner, node, handle, tbf_args(c.rate_mbit))
        return {"nodes": [by_rank[r].name for r in c.nodes], "mechanism": "netem" if netem else "nftables+tbf",
                **c.model_dump(exclude={"trigger", "name", "duration_s", "nodes"}, exclude_defaults=True)}

    def _drop_some(self, run: RunContext, node: Node, peers: list[Node]) -> None:
        table = run_names(run).nft_table(self.index)
        script = nft_ruleset(table, out_daddrs=[p.address or "" for p in peers], loss_pct=self.config.loss_pct)
        nft_add_table(run, self.owner, node, table, script)
