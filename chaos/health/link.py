"""Slow-link detection: name the rank whose outgoing link is slower than its peers'.

A degraded link (a flapping NIC, a bad cable, a congested switch port) slows every collective it
carries, so every rank's step time grows alike, and so does every rank's time inside the
collective: own time (chaos.health.straggler) cannot name it. What can is a point-to-point probe:
every rank sends the same payload to the next rank in a ring, one hop at a time, and the receiver
times what arrives. The data that arrives late is the data that crossed the slow link, so the time
lands in the *sender's* slot; one all-reduce later every rank holds the same vector and runs the same
detector (a StragglerDetector over probe times, with a floor so that sub-millisecond noise on
healthy links names no one).

On a multi-node job only the ring hops that cross nodes go through a NIC; ranks are placed node by
node, so each node's last rank sends across, and a slow node uplink is named by that rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from chaos.health.straggler import Straggler, StragglerDetector


def probe_ring(nbytes: int, group: Any = None) -> list[float]:
    """One probe, a collective: on every rank, the seconds each rank's ``nbytes`` took to reach the next
    rank (index: the sender). Torch is imported here, so the detector stays importable without it.

    One hop at a time, each after a barrier. Sent all at once, every link would look slow: a receiver's
    TCP acknowledgements leave through its own egress queue, behind its own payload, so a capped link
    slows the data coming *in* to its node as much as the data going out. And a barrier per hop keeps
    one hop's time from including how late its sender got there (a compute straggler's signature).
    It costs world_size small rounds: fine for a probe every few steps on tens of ranks; a large job
    would probe a sample of hops."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    n = max(1, nbytes // 4)
    payload, inbox = torch.ones(n), torch.empty(n)
    times = torch.zeros(world)
    for sender in range(world):
        receiver = (sender + 1) % world
        dist.barrier(group)
        if rank == sender:
            dist.send(payload, receiver, group=group)
        elif rank == receiver:
            t0 = time.monotonic()
            dist.recv(inbox, sender, group=group)
            times[sender] = time.monotonic() - t0
    dist.all_reduce(times, group=group)
    return times.tolist()


@dataclass
class LinkMonitor:
    """Every ``every`` steps a ring probe of ``nbytes``; a rank whose outgoing link takes ``factor`` times its
    peers' (and at least ``floor_s``) in ``patience`` windows of ``window`` probes in a row is named."""

    world_size: int
    every: int = 5
    nbytes: int = 256 * 1024
    factor: float = 3.0
    window: int = 3
    patience: int = 2
    floor_s: float = 0.005
    _detector: StragglerDetector = field(init=False)

    def __post_init__(self) -> None:
        self._detector = StragglerDetector(self.world_size, factor=self.factor, window=self.window,
                                           patience=self.patience, floor_s=self.floor_s)

    def due(self, step: int) -> bool:
        return self.world_size > 1 and self.every > 0 and step % self.every == 0

    def observe(self, step: int, times: list[float]) -> Straggler | None:
        """Feed one probe's times (the same list on every rank); returns a newly named slow sender."""
        return self._detector.observe(step, times)

    def probe(self, step: int, group: Any = None) -> Straggler | None:
        """At a due step, probe (a collective every rank must join at the same step) and judge."""
        if not self.due(step):
            return None
        return self.observe(step, probe_ring(self.nbytes, group))
