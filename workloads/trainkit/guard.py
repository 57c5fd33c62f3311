"""The non-finite guard: what a careful stack does about a NaN or an Inf inside the step.

Before the optimizer steps, every rank checks its own loss and the (already all-reduced) gradient
norm, and the ranks agree in one small all-reduce: a NaN on one rank is every rank's problem, and all
of them must take the same branch. On a bad step the rank that saw it names it in a health event
(``source: guard, code: nonfinite``) and, with policy ``restart``, every rank exits so torchrun
restarts the job from the last committed checkpoint, which was saved before the bad step: nothing
computed after it survives. A fault that comes back after the restart is persistent; the guard does
not loop on its own (torchrun's max_restarts ends it).
"""

from __future__ import annotations

import logging
import math

import torch
import torch.distributed as dist
from chaos import sdk
from chaos.health.monitor import my_device

log = logging.getLogger("trainkit")

POLICIES = ("off", "restart")


class NonFiniteStep(RuntimeError):
    """Raised on every rank when a step's loss or gradients are not finite (policy restart)."""


class NonFiniteGuard:
    def __init__(self, policy: str, rank: int, local_rank: int, world_size: int) -> None:
        if policy not in POLICIES:
            raise ValueError(f"--nonfinite must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.policy = policy
        self.rank, self.local_rank, self.world_size = rank, local_rank, world_size

    @property
    def on(self) -> bool:
        return self.policy != "off"

    def check(self, step: int, loss: torch.Tensor, params: list[torch.nn.Parameter]) -> None:
        """Raise NonFiniteStep on every rank when any rank's loss or the gradients are not finite."""
        grads = [p.grad.detach().reshape(-1) for p in params if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0
        mine = not (math.isfinite(float(loss.detach())) and math.isfinite(norm))
        flags = torch.zeros(self.world_size, device=loss.device)
        flags[self.rank] = 1.0 if mine else 0.0
        dist.all_reduce(flags)
        bad = [r for r, f in enumerate(flags.tolist()) if f > 0]
        if not bad:
            return
        if self.rank in bad:
            sdk.health(source="guard", code="nonfinite", device=my_device(self.local_rank), action=self.policy,
                       step=step, loss=_text(float(loss.detach())), grad_norm=_text(norm))
        log.warning("rank %d: step %d is not finite on rank(s) %s; exiting for a restart from the last checkpoint",
                    self.rank, step, bad)
        raise NonFiniteStep(f"step {step}: loss or gradients not finite on rank(s) {bad}")


def _text(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)
