"""Kill a node's container, as a crashed process, the kernel's OOM killer or ``docker kill`` does."""

from __future__ import annotations

import signal as _signal
from typing import Any

from pydantic import Field, field_validator

from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.context import RunContext


class ContainerKillConfig(FaultConfig):
    node: int = Field(default=1, ge=0)
    """The node whose pod's container is killed: node<node>."""
    signal: str = "SIGKILL"
    """The signal the container's main process (the torchrun agent) gets from the container runtime."""

    @field_validator("signal")
    @classmethod
    def _known(cls, value: str) -> str:
        name = value.upper() if value.upper().startswith("SIG") else f"SIG{value.upper()}"
        if name not in _signal.Signals.__members__:
            raise ValueError(f"unknown signal {value!r} (e.g. SIGKILL, SIGTERM)")
        return name


class ContainerKill(Fault, kind="container-kill"):
    """Kill a node's container, as a crashed process, the kernel's OOM killer or ``docker kill`` does.

    The container runtime signals the container's main process (the node's torchrun agent), the container
    exits, and the pod's restartPolicy decides: OnFailure, the kubelet restarts the container in place (its
    restart count goes up, with the kubelet's back-off); Never, the pod fails and the Job controller creates a
    new one, as long as backoffLimit allows. Nothing to revert.
    """

    Config = ContainerKillConfig
    needs_target = ("kubernetes",)

    def plan(self, run: RunContext) -> list[str]:
        c: ContainerKillConfig = self.config  # type: ignore[assignment]
        return [f"docker kill --signal {c.signal} <the running container of node{c.node}'s live pod>"]

    def check(self, run: RunContext) -> None:
        c: ContainerKillConfig = self.config  # type: ignore[assignment]
        nodes = getattr(run.target, "node_count", 0)
        if c.node >= nodes:
            raise CapabilityError(f"{self.label}: node {c.node} does not exist (the target has {nodes} node(s))")

    def inject(self, run: RunContext) -> dict[str, Any]:
        import docker

        c: ContainerKillConfig = self.config  # type: ignore[assignment]
        pod = run.target.pod_of(f"node{c.node}")  # type: ignore[union-attr]
        running = [s for s in pod.status.container_statuses or [] if s.state.running is not None and s.container_id]
        if not running:
            raise FaultError(f"{self.label}: node{c.node}'s pod {pod.metadata.name} has no running container")
        status = running[0]
        cid = status.container_id.removeprefix("docker://")
        client = docker.from_env()
        try:
            client.api.kill(cid, signal=c.signal)
        except docker.errors.APIError as exc:
            raise FaultError(f"{self.label}: docker refused to kill container {cid[:12]}: {exc}") from None
        finally:
            client.close()
        return {"pod": pod.metadata.name, "container": cid[:12], "node": f"node{c.node}", "signal": c.signal,
                "restart_count": status.restart_count}
