"""Make the job's Kubernetes node NotReady: its kubelet stops answering, as a kubelet that hung, crashed or lost the API.

On the local cluster the harness stops the node's kubelet (SIGSTOP) for ``duration_s`` and resumes it (SIGCONT; the
resume is in the ledger before the stop, so a failed run and ``chaos cleanup`` resume it too). Nothing on the node
is told: the containers train on. The node stops posting its status; the node controller marks it NotReady
(Unknown) once its grace period has passed (20 s on the local cluster, 40 s by Kubernetes' default) and taints it
``node.kubernetes.io/unreachable:NoExecute``; the taint manager evicts each pod once its toleration of that taint
runs out (``target.unreachable_toleration_s``; the cluster's default is 300 s). The Job's controller creates a
replacement for each evicted pod: on another Ready node it starts at once, while the evicted pod's containers
still run on the stopped node (nothing can stop them until its kubelet is back); on a one-node cluster it stays
Pending while the node is tainted. When the kubelet comes back it stops the evicted pods' containers (and starts
the replacements it holds), and the job resumes from its checkpoint. An outage shorter than the grace period and
the toleration evicts nothing: the job never noticed.

At the resume the fault records which of the run's pods had been evicted (``kube_evicted``: deleted while the
kubelet was stopped) and the cluster's own account of the outage, from its Events: when the node controller saw
the node NotReady, when the taint manager evicted each pod, when the kubelet said the node was Ready again
(``kube_events``). On an existing cluster the harness has the API only, which cannot stop a kubelet: refused
before launch (stop it on the node yourself, or use node-drain).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psutil
from pydantic import Field

from chaos.errors import FaultError
from chaos.faults._kube import KubeNodeConfig, KubeNodeFault
from chaos.kube.minicluster import api_errors
from chaos.runtime.context import RunContext
from chaos.runtime.undo import Signal

READY_WAIT_S = 15.0
"""After the resume, how long the fault waits for the kubelet to say the node is Ready before it reads the Events
(the kubelet posts its status every 2 s here; the harness's loop waits meanwhile, so this is short)."""


class NodeNotReadyConfig(KubeNodeConfig):
    """``node``: the job node whose Kubernetes node (where its live pod runs) goes NotReady."""

    duration_s: float | None = Field(default=45.0, gt=0, le=3600)
    """How long the kubelet stays stopped (then it is resumed: the node comes back)."""


class NodeNotReady(KubeNodeFault, kind="node-notready"):
    """Make the job's Kubernetes node NotReady: its kubelet stops answering, as a kubelet that hung, crashed or lost the API."""

    Config = NodeNotReadyConfig

    def plan(self, run: RunContext) -> list[str]:
        c: NodeNotReadyConfig = self.config  # type: ignore[assignment]
        return [f"kill -STOP <the local cluster's kubelet> (node{c.node}'s node); {c.duration_s:g} s later "
                f"kill -CONT it; record the pods the taint manager evicted meanwhile and the cluster's Events"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: NodeNotReadyConfig = self.config  # type: ignore[assignment]
        target: Any = run.target
        cluster = target.cluster
        if getattr(self, "_struck", None) is not None:
            raise FaultError(f"{self.label}: the kubelet is still stopped by this fault's last fire; a fire overlapping "
                             f"it would end with its resume")
        node = target.pod_of(f"node{c.node}").spec.node_name  # FaultError where the API cannot say
        if not node:
            raise FaultError(f"{self.label}: node{c.node}'s pod is not scheduled on a node yet")
        pid = cluster.kubelet_pid(node)  # that node's kubelet: on a cluster of several, each node has its own
        try:
            proc = psutil.Process(pid) if isinstance(pid, int) else None
            if proc is None or "kubelet" not in proc.name():
                raise FaultError(f"{self.label}: the kubelet of node {node} is not running (pid {pid})")
            created = proc.create_time()
        except psutil.NoSuchProcess:
            raise FaultError(f"{self.label}: the local cluster's kubelet (pid {pid}) is gone") from None
        run.ledger.push(self.owner, Signal(pid=proc.pid, create_time=created, signal="SIGCONT"))
        os.kill(proc.pid, signal.SIGSTOP)
        self._struck = (node, time.time())
        return {"node": node, "kubelet_pid": proc.pid, "stopped_s": c.duration_s}

    def revert(self, run: RunContext) -> list[Any]:
        struck = getattr(self, "_struck", None)
        evicted: list[str] | None = []
        if struck is not None:
            # Before the resume: a pod the taint manager deleted is still there, Terminating, for the kubelet to
            # stop; once it runs again the pod goes and what evicted it can only be read from the Events. (A run that
            # ends while the kubelet is stopped deletes its Jobs first, so its pods are listed here too: kube_recovered
            # then finds they never came back, which is true, the run ended.)
            try:
                evicted = sorted(p.metadata.name for p in run.target.pods()  # type: ignore[attr-defined]
                                 if p.metadata.deletion_timestamp is not None and p.spec.node_name == struck[0])
            except (FaultError, *api_errors()) as exc:
                evicted = None  # unknown, never "nothing evicted"
                run.log("kube_read_error", error=f"{self.label}: listing the pods: {exc}"[:300])
        failures = super().revert(run)
        if struck is not None:
            self._struck = None
            resumed = time.time()
            run.log("kube_evicted", fault=self.label, index=self.index, node=struck[0], pods=evicted,
                    t_resume=resumed)
            self._events(run, *struck)
        return failures

    def _events(self, run: RunContext, node: str, since: float) -> None:
        """The cluster's account of the outage (its Events), once the kubelet says the node is Ready again."""
        core = run.target.cluster.core()  # type: ignore[attr-defined]
        deadline = time.monotonic() + READY_WAIT_S
        ready = False
        while time.monotonic() < deadline and not ready:
            try:
                conditions = core.read_node(node, _request_timeout=5).status.conditions or []
                ready = any(x.type == "Ready" and x.status == "True" for x in conditions)
            except api_errors():
                pass
            if not ready:
                time.sleep(0.5)
        out = []
        try:
            namespaces = {"default", run.target.cluster.namespace}  # type: ignore[attr-defined]
            for ns in sorted(namespaces):
                for e in core.list_namespaced_event(ns, _request_timeout=5).items:
                    when = e.last_timestamp or e.event_time or e.first_timestamp
                    if when is None or when.timestamp() < since - 1:
                        continue
                    if e.reason in ("NodeNotReady", "NodeReady", "TaintManagerEviction", "NodeHasSufficientMemory",
                                    "Killing", "Scheduled", "Started"):
                        out.append({"t": when.timestamp(), "reason": e.reason, "kind": e.involved_object.kind,
                                    "name": e.involved_object.name, "message": (e.message or "")[:200]})
        except api_errors() as exc:
            run.log("kube_read_error", error=f"{self.label}: reading the Events: {exc}"[:300])
        run.log("kube_events", fault=self.label, index=self.index, node=node, ready_again=ready,
                events=sorted(out, key=lambda e: e["t"]))
