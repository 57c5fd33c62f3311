"""Take one replica group of a drop-replica job down whole, and start it again after duration_s: a replica that returns late."""

from __future__ import annotations

import signal as _signal
from typing import Any

from pydantic import Field, field_validator

from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.faults.kill_node import machine_loss_signal
from chaos.runtime.context import RunContext


class ReplicaDownConfig(FaultConfig):
    group: int = Field(default=1, ge=0)
    """The replica group to take down (node rg<group>): its torchrun job and every worker, at once, as a lost machine."""
    signal: str = "SIGKILL"
    """Signal sent to every process of the group (SIGKILL: no chance to leave the quorum cleanly)."""

    @field_validator("signal")
    @classmethod
    def _kills(cls, value: str) -> str:
        return machine_loss_signal("replica-down", value)


class ReplicaDown(Fault, kind="replica-down"):
    """Take one replica group of a drop-replica job down whole, and start it again after duration_s: a replica that returns late.

    With ``duration_s`` the harness starts the group again that long after (a new torchrun job: the machine
    came back), and the job is not over before it did, even if the other groups finished first: that is
    how a group comes back to find no live peer. Without it the group stays down for the rest of the run.
    """

    Config = ReplicaDownConfig
    needs_target = ("torchft",)

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        back = f"start it again after {c.duration_s:g} s" if c.duration_s else "it stays down"
        return [f"kill -{c.signal.removeprefix('SIG')} <torchrun agent of replica group rg{c.group} and every "
                f"descendant>; {back}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        target = run.target
        if target is None or not hasattr(target, "take_down"):
            raise FaultError("replica-down needs target torchft (replica groups the harness launched)")
        t_fault = run.clock.wall()
        pids = target.take_down(run, self.config.group, getattr(_signal, self.config.signal),
                                returning=self.config.duration_s is not None)
        return {"t_fault": t_fault, "node": f"rg{self.config.group}", "pids": pids, "signal": self.config.signal,
                "returns_after_s": self.config.duration_s}

    def revert(self, run: RunContext) -> list[Any]:
        failures = super().revert(run)
        if self.config.duration_s is not None and run.target is not None and hasattr(run.target, "bring_back"):
            pid = run.target.bring_back(run, self.config.group)
            if pid is not None:
                run.log("replica_back", node=f"rg{self.config.group}", pid=pid, fault=self.label)
        return failures
