"""Cordon the job's Kubernetes node and evict its pods, as an operator's ``kubectl drain`` does before maintenance."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import Field

from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.kube.minicluster import api_errors
from chaos.runtime.context import RunContext
from chaos.runtime.undo import Command


class NodeDrainConfig(FaultConfig):
    duration_s: float | None = Field(default=20.0, gt=0, le=7 * 24 * 3600)
    """How long the node stays cordoned (then it is uncordoned: the maintenance is over)."""
    grace_s: int | None = Field(default=None, ge=0, le=3600)
    """The evictions' grace period; None: each pod's own terminationGracePeriodSeconds."""


class NodeDrain(Fault, kind="node-drain"):
    """Cordon the job's Kubernetes node and evict its pods, as an operator's ``kubectl drain`` does before maintenance.

    The node is marked unschedulable and every pod of the run on it is evicted through the Eviction API
    (SIGTERM, then SIGKILL after the grace period). The Jobs' controller creates new pods at once; they stay
    Pending while the node is cordoned (on the one-node local cluster there is nowhere else to go), and start
    when the node is uncordoned after ``duration_s``: the job waits, then resumes from its checkpoint. The
    uncordon is in the ledger before the cordon, so a failed run and ``chaos cleanup`` undo it too.
    """

    Config = NodeDrainConfig
    needs_target = ("kubernetes",)

    def plan(self, run: RunContext) -> list[str]:
        c: NodeDrainConfig = self.config  # type: ignore[assignment]
        return ["PATCH node spec.unschedulable=true; POST an Eviction (policy/v1beta1) for each of the run's pods on "
                f"it; {c.duration_s:g} s later PATCH spec.unschedulable=null"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: NodeDrainConfig = self.config  # type: ignore[assignment]
        target: Any = run.target
        cluster = target.cluster
        node = cluster.node
        ctl = [sys.executable, "-m", "chaos.kube.ctl"]
        run.ledger.push(self.owner, Command(ctl + ["uncordon", str(cluster.kubeconfig), node],
                                            only_if=ctl + ["cordoned", str(cluster.kubeconfig), node]))
        core = cluster.core()
        try:
            core.patch_node(node, {"spec": {"unschedulable": True}})
        except api_errors() as exc:
            raise FaultError(f"{self.label}: the API server refused to cordon node {node}: {exc}") from None
        evicted = []
        for pod in target.pods():
            if pod.spec.node_name != node or pod.metadata.deletion_timestamp is not None:
                continue
            body: dict[str, Any] = {"apiVersion": "policy/v1beta1", "kind": "Eviction",
                                    "metadata": {"name": pod.metadata.name, "namespace": cluster.namespace}}
            if c.grace_s is not None:
                body["deleteOptions"] = {"gracePeriodSeconds": c.grace_s}
            try:
                core.create_namespaced_pod_eviction(pod.metadata.name, cluster.namespace, body)
            except api_errors() as exc:
                raise FaultError(f"{self.label}: evicting pod {pod.metadata.name} failed: {exc}") from None
            evicted.append(pod.metadata.name)
        return {"node": node, "evicted": evicted, "cordoned_s": c.duration_s}
