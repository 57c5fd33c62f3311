"""Published failure mixes of large training runs, and how each category of failure is played on our targets.

A mix is a table of root causes with how often each struck a cluster of a known size over a known
span. Each cause belongs to one *category* (gpu, hbm, network, software, maintenance, host), and a
category is played as one of the harness's faults, chosen by the target: a node-level fault needs
nodes (netns, docker, slurm), a spare node to replace a drained one needs Slurm. Where a target
cannot play a category faithfully, the stand-in and why are written next to it (``Play.why``), and
reports show them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("gpu", "hbm", "network", "software", "maintenance", "host")


@dataclass(frozen=True)
class Cause:
    """One row of a published root-cause table."""

    name: str
    count: int
    category: str


@dataclass(frozen=True)
class Mix:
    """Interruptions by root cause on ``gpus`` GPUs over ``span_days`` days."""

    name: str
    source: str
    gpus: int
    span_days: float
    causes: tuple[Cause, ...]

    @property
    def total(self) -> int:
        return sum(c.count for c in self.causes)

    def rate_per_gpu_hour(self, cause: Cause) -> float:
        return cause.count / (self.gpus * self.span_days * 24.0)

    def by_category(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.causes:
            out[c.category] = out.get(c.category, 0) + c.count
        return out


# Llama 3 405B pre-training, 54 days on 16,384 H100s: 419 unexpected interruptions (The Llama 3 Herd
# of Models, Meta 2024, Table 5). 78 % were confirmed or suspected hardware.
LLAMA3_405B = Mix(
    name="llama3-405b",
    source="The Llama 3 Herd of Models (Meta, 2024), Table 5: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs",
    gpus=16384,
    span_days=54.0,
    causes=(
        Cause("Faulty GPU", 148, "gpu"),
        Cause("GPU HBM3 Memory", 72, "hbm"),
        Cause("Software Bug", 54, "software"),
        Cause("Network Switch/Cable", 35, "network"),
        Cause("Host Maintenance", 32, "maintenance"),
        Cause("GPU SRAM Memory", 19, "gpu"),
        Cause("GPU System Processor", 17, "gpu"),
        Cause("NIC", 7, "network"),
        Cause("NCCL Watchdog Timeouts", 7, "network"),
        Cause("Silent Data Corruption", 6, "gpu"),
        Cause("GPU Thermal Interface + Sensor", 6, "gpu"),
        Cause("SSD", 3, "host"),
        Cause("Power Supply", 3, "host"),
        Cause("Server Chassis", 2, "host"),
        Cause("IO Expansion Board", 2, "host"),
        Cause("Dependency", 2, "software"),
        Cause("CPU", 2, "host"),
        Cause("System Memory", 2, "host"),
    ),
)

MIXES: dict[str, Mix] = {LLAMA3_405B.name: LLAMA3_405B}


@dataclass(frozen=True)
class Play:
    """How one category is played on one kind of target: a fault template, and why this one."""

    fault: dict[str, Any]
    why: str
    draws: tuple[str, ...] = field(default=())
    """Fields drawn per fault from the seed: 'device' (a GPU slot), 'node' (a node other than the rendezvous host),
    'rank' (a global rank of the job), 'group' (a torchft replica group, as its node ``rg<k>``)."""


_NODES = ("netns", "docker", "slurm")
_LOCAL_NODE_LOSS = "one machine: every rank of the job dies at once, as they do when their node is lost"


def _node_loss(signal: str, what: str, elastic: bool, target_kind: str) -> Play:
    if target_kind == "slurm" or elastic:
        return Play({"kind": "kill-node", "node": "random", "signal": signal},
                    f"{what}: the node is lost" + (" and the elastic job goes on without it" if elastic else ""))
    # No scheduler to replace the node and no elastic minimum to go on without it: a killed node
    # never comes back, which no job survives. Its ranks die instead, as if it were replaced at once.
    return Play({"kind": "kill-rank", "rank": "all", "signal": signal, "node": "node1"},
                f"{what}: the job is not elastic (min_nodes) and this target has no spare node, so the node's "
                f"ranks die and come back with the restart, as if the node were replaced at once")


SILENT_DATA_CORRUPTION = "Silent Data Corruption"


def play_cause(cause: str, category: str, target_kind: str, *, elastic: bool = False) -> Play:
    """How one root cause is played: its category's play, except where the harness can produce the cause itself.

    Silent data corruption is a wrong value a GPU computes without an error: played inside the step, as one
    flipped bit (the top exponent bit of a weight, which makes it huge) on one drawn rank (chaos.faults.bitflip).
    Nothing crashes; only a job that checks its values (a non-finite guard, a replica comparison) sees it,
    and one that does not trains on and ends apart from the fault-free run.
    """
    if cause == SILENT_DATA_CORRUPTION:
        return Play({"kind": "bitflip", "where": "param", "bit": 30, "tensor": 0, "element": 0},
                    "silent data corruption: the top exponent bit of one weight flipped on one rank, inside the step; "
                    "nothing crashes, so only the job's own guard (non-finite values, replica checksums) can catch it",
                    draws=("rank",))
    return play(category, target_kind, elastic=elastic)


def play(category: str, target_kind: str, *, elastic: bool = False) -> Play:
    """The default way ``category`` strikes a job on ``target_kind`` (``elastic``: it goes on with fewer nodes)."""
    nodes = target_kind in _NODES
    if category == "gpu":
        if target_kind == "slurm":
            return Play({"kind": "xid", "code": 79, "sink": "file", "device": 0}, "XID 79 (fallen off the bus): "
                        "the monitor excludes the GPU, the node is drained and Slurm requeues onto a spare",
                        draws=("node",))
        return Play({"kind": "kill-rank", "rank": "random", "signal": "SIGKILL"},
                    "the rank on the failed GPU dies (its CUDA context is gone); no spare node on this target to "
                    "exclude the GPU onto, so the GPU comes back after the restart (use target slurm with spare_nodes "
                    "for the exclude-and-replace path)")
    if category == "hbm":
        return Play({"kind": "xid", "code": 92, "sink": "nvml", "repeat": {"every_s": 1.5, "count": 4}},
                    "XID 92 ECC creep: single-bit error rate rising until the monitor calls the card degrading and "
                    "the job checkpoints", draws=("device",))
    if category == "network":
        if nodes:
            return Play({"kind": "partition", "nodes": [1], "duration_s": 20},
                        "a switch, cable or NIC fault cuts a node off for 20 s: the collective times out")
        return Play({"kind": "hang-rank", "rank": "random", "duration_s": 20},
                    "one machine has no links to cut: a rank stops answering for 20 s, which its peers see as the "
                    "same hung collective (set the workload's process-group timeout below 20 s)")
    if category == "software":
        return Play({"kind": "kill-rank", "rank": "random", "signal": "SIGABRT"}, "a crash of one rank (SIGABRT)")
    if target_kind == "torchft" and category in ("maintenance", "host"):
        # A replica group is a host (or a set of hosts) of its own: losing one takes that group down, not the job.
        signal, what = (("SIGTERM", "the host is taken down for maintenance (SIGTERM)") if category == "maintenance"
                        else ("SIGKILL", "a host part (SSD, power, CPU, memory) fails"))
        return Play({"kind": "kill-rank", "rank": "all", "signal": signal},
                    f"{what}: every rank of one replica group dies; the other groups train on without it, and its "
                    f"torchrun restarts it to heal from a live peer", draws=("group",))
    if category == "maintenance":
        if target_kind == "slurm":
            return Play({"kind": "preempt", "grace_s": 15}, "the scheduler takes the node: SIGTERM, grace, requeue")
        if nodes:
            return _node_loss("SIGTERM", "the host is taken down for maintenance (SIGTERM)", elastic, target_kind)
        return Play({"kind": "kill-rank", "rank": "all", "signal": "SIGTERM"},
                    "the host is taken down for maintenance: on one machine every rank gets SIGTERM at once")
    if category == "host":
        if nodes:
            return _node_loss("SIGKILL", "a host part (SSD, power, CPU, memory) fails", elastic, target_kind)
        return Play({"kind": "kill-rank", "rank": "all", "signal": "SIGKILL"},
                    "a host part (SSD, power, CPU, memory) fails: " + _LOCAL_NODE_LOSS)
    raise KeyError(category)
