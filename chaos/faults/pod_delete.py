"""Delete a node's pod through the Kubernetes API, as an eviction, a preemption or an operator does."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.errors import FaultError
from chaos.faults._kube import KubeNodeConfig, KubeNodeFault
from chaos.kube.minicluster import api_errors
from chaos.runtime.context import RunContext


class PodDeleteConfig(KubeNodeConfig):
    grace_s: int | None = Field(default=None, ge=0, le=3600)
    """The deletion's gracePeriodSeconds: SIGTERM to the container, SIGKILL this much later. None: the pod's own
    terminationGracePeriodSeconds (target.grace_s). 0: at once."""


class PodDelete(KubeNodeFault, kind="pod-delete"):
    """Delete a node's pod through the Kubernetes API, as an eviction, a preemption or an operator does.

    The kubelet stops the pod's container (SIGTERM, then SIGKILL after the grace period) and the pod is gone;
    the Job's controller then decides what follows: a new pod for the node (restartPolicy Never or OnFailure
    alike, as long as backoffLimit allows), which joins the torchrun rendezvous again and resumes from the
    checkpoint. Nothing to revert: the deletion is the fault, and the recovery is the Job's.
    """

    Config = PodDeleteConfig

    def plan(self, run: RunContext) -> list[str]:
        c: PodDeleteConfig = self.config  # type: ignore[assignment]
        grace = "the pod's own grace period" if c.grace_s is None else f"grace {c.grace_s} s"
        return [f"DELETE the live pod of node{c.node} (label chaos/node=node{c.node}), {grace}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: PodDeleteConfig = self.config  # type: ignore[assignment]
        target: Any = run.target
        pod = target.pod_of(f"node{c.node}")
        kwargs = {} if c.grace_s is None else {"grace_period_seconds": c.grace_s}
        try:
            target.cluster.core().delete_namespaced_pod(pod.metadata.name, target.cluster.namespace, **kwargs)
        except api_errors() as exc:
            raise FaultError(f"{self.label}: the API server refused to delete pod {pod.metadata.name}: {exc}") \
                from None
        grace = c.grace_s if c.grace_s is not None else pod.spec.termination_grace_period_seconds
        return {"pod": pod.metadata.name, "pod_uid": pod.metadata.uid, "node": f"node{c.node}", "grace_s": grace}
