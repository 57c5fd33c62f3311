"""The non-finite guard: what a careful stack does about a NaN or an Inf inside the step.

Before the optimizer steps, every rank checks its own loss and the (already all-reduced) gradient
norm, and the ranks agree in one small all-reduce: a NaN on one rank is every rank's problem, and all
of them must take the same branch. On a bad step the rank that saw it names it in a health event
(``source: guard, code: nonfinite``, ``action`` the policy), and every rank takes the same branch:

- ``restart``: every rank exits so torchrun restarts the job from the last committed checkpoint, which
  was saved before the bad step: nothing computed after it survives.
- ``rollback``: every rank reloads the last committed checkpoint in-process and trains the steps
  again (what Megatron's and torchft's in-job recovery do, without paying a restart). A bad step that
  comes back before the job got past it is not transient: the guard then exits for a restart (and
  the strikes below decide whether the device goes).
- ``skip``: every rank drops the step's update (no optimizer step; the learning-rate schedule and the
  data cursor move on), as a mixed-precision loss scaler does on an overflow. The batch is lost: its
  step event says ``skipped``, and ``exactly_once`` names the samples that were never trained.

A fault that comes back after the restart is persistent (a failing GPU): rolling back again would loop
until torchrun's max_restarts ends the job. With ``exclude_after`` K, each rank that sees a bad step
records a strike against its device in the checkpoint folder (it outlives the attempt), and the K-th
strike of one device excludes it, as the XID policy does (a strike is counted against the rank whose
own loss was not finite: the one the bad value came from, not the peers whose gradient average it
poisoned; a bad gradient that no rank's loss shows cannot be attributed and only rolls back): the rank records the exclusion
(chaos.health.monitor), every rank stops the launch, and the scheduler (the harness's relaunch policy
here) starts the job again without that device, from the last checkpoint.
"""

from __future__ import annotations

import logging
import math
import os
import socket

import torch
import torch.distributed as dist
from chaos import sdk
from chaos.health.exclusions import exclusions_path
from chaos.health.monitor import my_device, record_exclusion

log = logging.getLogger("trainkit")

POLICIES = ("off", "restart", "rollback", "skip")


class NonFiniteStep(RuntimeError):
    """Raised on every rank when a step's loss or gradients are not finite (policy restart, or a rollback that did
    not outrun the fault)."""


class RollBack(NonFiniteStep):
    """Raised on every rank when a step is not finite under policy rollback: reload the last checkpoint in-process."""


class SkipStep(NonFiniteStep):
    """Raised on every rank when a step is not finite under policy skip: drop its update."""


class ExcludeDevice(NonFiniteStep):
    """Raised on every rank when a device's bad steps came back ``exclude_after`` times: stop the launch."""


class NonFiniteGuard:
    def __init__(self, policy: str, rank: int, local_rank: int, world_size: int, *, exclude_after: int = 0,
                 strikes_dir: str = "") -> None:
        if policy not in POLICIES:
            raise ValueError(f"--nonfinite must be one of {', '.join(POLICIES)}, got {policy!r}")
        if exclude_after and not strikes_dir:
            raise ValueError("--nonfinite-exclude-after needs a checkpoint folder to keep the strikes in")
        self.policy = policy
        self.rank, self.local_rank, self.world_size = rank, local_rank, world_size
        self.exclude_after = exclude_after
        self.strikes_dir = strikes_dir
        self.rolled_back_at: int | None = None
        """The bad step the last in-process rollback answered: one at or before it again means the rollback did
        not outrun the fault (every rank holds the same value: they agree on every bad step)."""

    @property
    def on(self) -> bool:
        return self.policy != "off"

    def check(self, step: int, loss: torch.Tensor, params: list[torch.nn.Parameter]) -> None:
        """Raise NonFiniteStep on every rank when any rank's loss or the gradients are not finite."""
        grads = [p.grad.detach().reshape(-1) for p in params if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0
        own_loss = math.isfinite(float(loss.detach()))
        mine = not (own_loss and math.isfinite(norm))
        # Two slots per rank: whether its step is bad, and, when its own loss is not finite (it is where the bad
        # value came from, not a peer whose average it poisoned), 1 + the strikes its device already had. One
        # all-reduce tells every rank whether to roll back or to exclude, and whom.
        flags = torch.zeros(2 * self.world_size, device=loss.device)
        flags[self.rank] = 1.0 if mine else 0.0
        flags[self.world_size + self.rank] = 1.0 + self._strikes() if not own_loss else 0.0
        dist.all_reduce(flags)
        values = flags.tolist()
        bad = [r for r in range(self.world_size) if values[r] > 0]
        if not bad:
            return
        origin = {r: int(values[self.world_size + r]) for r in range(self.world_size) if values[self.world_size + r] > 0}
        persistent = [r for r, strikes in origin.items() if self.exclude_after and strikes >= self.exclude_after]
        policy = self.policy
        if policy == "rollback" and self.rolled_back_at is not None and step <= self.rolled_back_at:
            policy = "restart"  # back before the job got past the step it rolled back from: not transient
        if self.rank in bad:
            device = my_device(self.local_rank)
            excluded = self.rank in persistent
            if self.rank in origin:
                self._strike(step)
            sdk.health(source="guard", code="nonfinite", device=device, action="exclude" if excluded else policy,
                       step=step, loss=_text(float(loss.detach())), grad_norm=_text(norm),
                       **({"strikes": origin[self.rank]} if self.rank in origin else {}))
            if excluded:
                record_exclusion(str(exclusions_path()), device=device, code="nonfinite", rank=self.rank,
                                 strikes=origin[self.rank])
        if persistent:
            log.warning("rank %d: step %d is not finite again on rank(s) %s (strike %d): excluding their device(s)",
                        self.rank, step, persistent, self.exclude_after)
            raise ExcludeDevice(f"step {step}: not finite on rank(s) {persistent} for the {self.exclude_after}th time")
        what = f"step {step}: loss or gradients not finite on rank(s) {bad}"
        if policy == "skip":
            log.warning("rank %d: %s; dropping its update", self.rank, what)
            raise SkipStep(what)
        if policy == "rollback":
            self.rolled_back_at = step
            log.warning("rank %d: %s; rolling back to the last checkpoint in-process", self.rank, what)
            raise RollBack(what)
        log.warning("rank %d: %s%s; exiting for a restart from the last checkpoint", self.rank, what,
                    " again after rolling back from it" if policy != self.policy else "")
        raise NonFiniteStep(what)

    def _strike_file(self) -> str:
        host = os.environ.get("CHAOS_HOST") or socket.gethostname()
        return os.path.join(self.strikes_dir, "guard_strikes", f"{host}-device{my_device(self.local_rank)}")

    def _strikes(self) -> int:
        """Bad steps this rank's device had before (in any attempt): one line each."""
        if not self.exclude_after:
            return 0
        try:
            with open(self._strike_file(), encoding="utf-8") as fh:
                return sum(1 for _ in fh)
        except FileNotFoundError:
            return 0

    def _strike(self, step: int) -> None:
        if not self.exclude_after:
            return
        path = self._strike_file()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{sdk.attempt_id()} {step}\n")


def _text(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)
