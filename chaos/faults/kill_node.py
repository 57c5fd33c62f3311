"""Kill every process of a node (its torchrun agent and all its workers) at once, as a machine loss looks to its peers."""

from __future__ import annotations

import signal as _signal
from typing import Any, Literal

import psutil
from pydantic import field_validator

from chaos.runtime.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig


class KillNodeConfig(FaultConfig):
    node: int | Literal["random"] = 1
    """Node rank to kill (0 is the rendezvous host: killing it ends the job), or 'random' among the others."""
    signal: str = "SIGKILL"
    """Signal sent to every process of the node at once (SIGKILL: no chance to clean up, like a power loss)."""

    @field_validator("signal")
    @classmethod
    def _known_signal(cls, value: str) -> str:
        return machine_loss_signal("kill-node", value)


def machine_loss_signal(kind: str, value: str) -> str:
    """A signal that ends every process of a node at once, as a machine loss does, by its full name."""
    name = value.upper() if value.upper().startswith("SIG") else "SIG" + value.upper()
    if name not in ("SIGKILL", "SIGTERM", "SIGINT", "SIGQUIT", "SIGABRT"):
        raise ValueError(f"{kind} takes SIGKILL, SIGTERM, SIGINT, SIGQUIT or SIGABRT (got '{value}')")
    return name


class KillNode(Fault, kind="kill-node"):
    """Kill every process of a node (its torchrun agent and all its workers) at once, as a machine loss looks to its peers."""

    Config = KillNodeConfig
    needs_target = ("netns", "docker", "slurm")

    def plan(self, run: RunContext) -> list[str]:
        return [f"kill -{self.config.signal.removeprefix('SIG')} <agent of node {self.config.node} and every descendant>"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        nodes = run.target.nodes if run.target else []
        if self.config.node == "random":
            choices = [n for n in nodes if n.rank != 0 and n.poll() is None]
            if not choices:
                raise FaultError("no live node other than node 0 to kill")
            node = run.rng.choice(choices)
        else:
            node = next((n for n in nodes if n.rank == self.config.node), None)
            if node is None:
                raise FaultError(f"no node with rank {self.config.node}; the run has {[n.rank for n in nodes]}")
        procs = [p for name, p in run.tree.processes() if name == node.name]
        if not procs:
            raise FaultError(f"{node.name} has no live process left to kill")
        # Marked before acting: its exit code is the fault's doing, not the job's verdict.
        node.info["lost"] = True
        sig = getattr(_signal, self.config.signal)
        pids = []
        for p in procs:
            try:
                p.send_signal(sig)  # psutil refuses a pid that is no longer this process
                pids.append(p.pid)
            except psutil.NoSuchProcess:
                continue
        return {"node": node.name, "pids": pids, "signal": self.config.signal}
