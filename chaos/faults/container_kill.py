"""Kill a node's container, as a crashed process, the kernel's OOM killer or ``docker kill`` does."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from chaos.errors import FaultError
from chaos.faults._kube import KubeNodeConfig, KubeNodeFault
from chaos.faults.kill_node import machine_loss_signal
from chaos.runtime.context import RunContext


class ContainerKillConfig(KubeNodeConfig):
    signal: str = "SIGKILL"
    """The signal the container's main process (the torchrun agent) gets: one that ends a process as a crash does
    (SIGKILL, SIGTERM, SIGINT, SIGQUIT, SIGABRT); a stopped container is a hang, not a kill."""

    @field_validator("signal")
    @classmethod
    def _known(cls, value: str) -> str:
        return machine_loss_signal("container-kill", value)


class ContainerKill(KubeNodeFault, kind="container-kill"):
    """Kill a node's container, as a crashed process, the kernel's OOM killer or ``docker kill`` does.

    The container's main process (the node's torchrun agent) gets the signal and the container exits, and the
    pod's restartPolicy decides: OnFailure, the kubelet restarts the container in place (its restart count goes
    up, with the kubelet's back-off); Never, the pod fails and the Job controller creates a new one, as long as
    backoffLimit allows. On the local cluster the container runtime sends it (``docker kill``); on an existing
    cluster, where the harness has the API only, an exec in the container does (its first process is the harness's
    small shell, which exits with the agent's status, so the container ends as the agent's death says). Nothing to
    revert.
    """

    Config = ContainerKillConfig

    def plan(self, run: RunContext) -> list[str]:
        c: ContainerKillConfig = self.config  # type: ignore[assignment]
        if getattr(run.target, "local", True):
            return [f"docker kill --signal {c.signal} <the running container of node{c.node}'s live pod>"]
        return [f"exec in node{c.node}'s live pod: kill -s {c.signal.removeprefix('SIG')} <its torchrun agent>"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: ContainerKillConfig = self.config  # type: ignore[assignment]
        target: Any = run.target
        pod = target.pod_of(f"node{c.node}")
        status = target.agent_status(pod)
        if status is None:
            raise FaultError(f"{self.label}: node{c.node}'s pod {pod.metadata.name} has no running agent container")
        cid = target.container_id(status)
        if target.local:
            import docker

            try:
                client = target.cluster.docker(pod.spec.node_name)  # the daemon of the pod's Kubernetes node
            except docker.errors.DockerException as exc:
                raise FaultError(f"{self.label}: the docker daemon of node {pod.spec.node_name} does not answer: "
                                 f"{exc}") from None
            try:
                client.api.kill(cid, signal=c.signal)
            except docker.errors.APIError as exc:
                raise FaultError(f"{self.label}: docker refused to kill container {cid[:12]}: {exc}") from None
            finally:
                client.close()
        else:
            target.kill_agent(run, pod, c.signal)
        return {"pod": pod.metadata.name, "container": cid[:12], "node": f"node{c.node}", "signal": c.signal,
                "restart_count": status.restart_count}
