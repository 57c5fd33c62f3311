"""Cordon the job's Kubernetes node and evict its pods, as an operator's ``kubectl drain`` does before maintenance."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.errors import FaultError
from chaos.faults._kube import KubeNodeConfig, KubeNodeFault
from chaos.kube.ctl import CORDONED_BY, command
from chaos.kube.existing import absolute
from chaos.kube.minicluster import api_errors
from chaos.runtime.context import RunContext
from chaos.runtime.undo import Command


class NodeDrainConfig(KubeNodeConfig):
    """``node``: the job node whose Kubernetes node (where its live pod runs) is drained."""

    duration_s: float | None = Field(default=20.0, gt=0, le=7 * 24 * 3600)
    """How long the node stays cordoned (then it is uncordoned: the maintenance is over)."""
    grace_s: int | None = Field(default=None, ge=0, le=3600)
    """The evictions' grace period; None: each pod's own terminationGracePeriodSeconds."""


class NodeDrain(KubeNodeFault, kind="node-drain"):
    """Cordon the job's Kubernetes node and evict its pods, as an operator's ``kubectl drain`` does before maintenance.

    The Kubernetes node that job node ``node``'s pod runs on is marked unschedulable (on the local cluster: its
    one node), and every pod of the run on it, and nothing else, is evicted through the Eviction API
    (SIGTERM, then SIGKILL after the grace period). The Jobs' controller creates new pods at once; they stay
    Pending while the node is cordoned (on the one-node local cluster there is nowhere else to go), and start
    when the node is uncordoned after ``duration_s``: the job waits, then resumes from its checkpoint. The
    uncordon is in the ledger before the cordon, so a failed run and ``chaos cleanup`` undo it too.
    """

    Config = NodeDrainConfig

    def plan(self, run: RunContext) -> list[str]:
        c: NodeDrainConfig = self.config  # type: ignore[assignment]
        return [f"PATCH the node of node{c.node}'s pod spec.unschedulable=true; POST an Eviction (policy/v1, or v1beta1) "
                f"for each of the run's pods on it; {c.duration_s:g} s later PATCH spec.unschedulable=null"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: NodeDrainConfig = self.config  # type: ignore[assignment]
        target: Any = run.target
        cluster = target.cluster
        node = target.pod_of(f"node{c.node}").spec.node_name  # FaultError where the API cannot say
        if not node:
            raise FaultError(f"{self.label}: node{c.node}'s pod is not scheduled on a node yet")
        core = cluster.core()
        try:
            if core.read_node(node, _request_timeout=10).spec.unschedulable:
                # Someone else's cordon: the drain's uncordon would end it too.
                raise FaultError(f"{self.label}: node {node} is already cordoned; refusing to drain it (the undo "
                                 f"would uncordon it)")
        except api_errors() as exc:
            raise FaultError(f"{self.label}: reading node {node} failed: {exc}") from None
        owner = target.prefix(run)
        where = (absolute(cluster.kubeconfig), node, owner)
        scope = {"context": getattr(cluster, "context", None), "local": target.local}
        run.ledger.push(self.owner, Command(command("uncordon", *where, **scope),
                                            only_if=command("cordoned", *where, **scope)))
        try:
            # The cordon names its owner: the undo ends only a cordon of the run's own (ctl.CORDONED_BY).
            core.patch_node(node, {"metadata": {"annotations": {CORDONED_BY: owner}}, "spec": {"unschedulable": True}},
                            _request_timeout=10)
        except api_errors() as exc:
            raise FaultError(f"{self.label}: the API server refused to cordon node {node}: {exc}") from None
        evicted = []
        for pod in target.pods():
            if pod.spec.node_name != node or pod.metadata.deletion_timestamp is not None:
                continue
            evict(core, pod.metadata.name, cluster.namespace, c.grace_s, self.label)
            evicted.append(pod.metadata.name)
        return {"node": node, "evicted": evicted, "cordoned_s": c.duration_s}


def evict(core: Any, name: str, namespace: str, grace_s: int | None, label: str) -> None:
    """POST an Eviction: policy/v1 (Kubernetes 1.22 on), else policy/v1beta1 (the local 1.20, deprecated since)."""
    from kubernetes.client.exceptions import ApiException

    for version in ("policy/v1", "policy/v1beta1"):
        body: dict[str, Any] = {"apiVersion": version, "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace_s is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_s}
        try:
            core.create_namespaced_pod_eviction(name, namespace, body, _request_timeout=10)
            return
        except ApiException as exc:
            if exc.status in (400, 404, 415) and version == "policy/v1":
                continue  # a server that does not know this version of the kind
            raise FaultError(f"{label}: evicting pod {name} failed: {exc.status} {exc.reason}") from None
        except api_errors() as exc:
            raise FaultError(f"{label}: evicting pod {name} failed: {exc}") from None
