"""The replica check: what catches silent data corruption that stays finite.

DDP keeps one replica of the model per rank, kept equal by averaging gradients: a bit flipped in one
rank's weights (a failing GPU, a bad HBM cell) is never averaged away, and training goes on with the
replicas apart, silently. Every ``every`` steps, before the periodic save (so a corrupted state is
never committed), each rank reduces its parameters to an exact checksum (the sum of their bit
patterns as integers: one flipped bit changes it by exactly 2**bit) and the ranks compare them in one
all-gather. On disagreement the ranks whose checksum differs from the majority's (rank 0's on a tie)
name themselves in a health event (``source: replica_check, code: sdc``) and every rank exits, so
torchrun restarts from the last committed checkpoint, saved before the corruption.
"""

from __future__ import annotations

import logging
from collections import Counter

import torch
import torch.distributed as dist
from chaos import sdk
from chaos.health.monitor import my_device

log = logging.getLogger("trainkit")

_BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


class ReplicasDiverged(RuntimeError):
    """Raised on every rank when the ranks' parameter checksums disagree."""


def checksum(params: list[torch.Tensor]) -> int:
    """An exact checksum of the parameters' bits (local shards of DTensors)."""
    total = 0
    for p in params:
        t = p.detach()
        to_local = getattr(t, "to_local", None)
        t = to_local() if callable(to_local) else t
        view = _BITS.get(t.dtype)
        bits = t.reshape(-1).view(view) if view is not None else t.reshape(-1)
        total += int(bits.to(torch.int64).sum())
    return total


class ReplicaCheck:
    def __init__(self, every: int, rank: int, local_rank: int, world_size: int) -> None:
        if every < 0:
            raise ValueError(f"--replica-check-every must be 0 (off) or a number of steps, got {every}")
        self.every, self.rank, self.local_rank, self.world_size = every, rank, local_rank, world_size

    def due(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def check(self, step: int, params: list[torch.Tensor]) -> None:
        mine = checksum(params)
        # Two int64 words (high and low) per rank: the checksum may not fit one.
        words = torch.tensor([mine >> 62, mine & ((1 << 62) - 1)], dtype=torch.int64)
        gathered = [torch.zeros(2, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(gathered, words)
        sums = [(int(w[0]) << 62) | int(w[1]) for w in gathered]
        if len(set(sums)) == 1:
            return
        counts = Counter(sums)
        top = max(counts.values())
        reference = sums[0] if counts[sums[0]] == top else next(s for s in sums if counts[s] == top)
        apart = [r for r, s in enumerate(sums) if s != reference]
        if self.rank in apart:
            sdk.health(source="replica_check", code="sdc", device=my_device(self.local_rank), action="restart",
                       step=step, ranks_apart=apart)
        log.warning("rank %d: the replicas disagree at step %d (rank(s) %s differ from the majority); exiting "
                    "for a restart from the last checkpoint", self.rank, step, apart)
        raise ReplicasDiverged(f"step {step}: parameters of rank(s) {apart} differ from their peers'")
