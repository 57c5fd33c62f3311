"""The kubernetes target's configuration: a throwaway local cluster, or a user's existing one through its kubeconfig."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from chaos.spec.configs import TargetConfig

EXISTING_ONLY = ("kubeconfig", "context", "namespace", "pod_template", "shared_dir", "rdzv_host", "python")
EXISTING_NEEDS = {
    "namespace": "the namespace the run's Jobs go in (it must exist; the harness creates nothing else there)",
    "pod_template": "a YAML file with the pod your job runs in (image, volumes, resources, nodeSelector, ...)",
    "shared_dir": "a directory on this host that every pod mounts at the same path (the run's events and "
                  "checkpoints live there)",
    "rdzv_host": "the address every pod reaches node 0's torchrun agent at (e.g. a headless Service's DNS name "
                 "selecting chaos/node=node0; 127.0.0.1 for hostNetwork pods on one node)",
}


class KubernetesConfig(TargetConfig):
    # What the cluster does after a fault (how a pod comes back, how long it may wait, how long it tolerates a lost
    # node, how many Kubernetes nodes it may go to), never the ranks' layout: experiments differing only in these
    # share one fault-free golden run.
    GOLDEN_NEUTRAL: ClassVar[frozenset[str]] = frozenset(
        {"restart_policy", "backoff_limit", "grace_s", "start_timeout_s", "unreachable_toleration_s", "cluster_nodes",
         "rdzv_port"})

    cluster: Literal["local", "existing"] = "local"
    """local: a throwaway real single-node cluster for the run (root, docker, and the build of
    scripts/kube-build.sh). existing: your cluster through its kubeconfig; the harness creates only the run's
    Jobs (labelled chaos/run) in ``namespace`` and reaches the ranks through the API (exec), never a host."""
    nodes: int = Field(default=2, ge=1, le=8)
    """Nodes of the job: one Job (one pod, one torchrun agent) each."""
    cluster_nodes: int = Field(default=1, ge=1, le=4)
    """local: the cluster's Kubernetes nodes. 1: one kubelet on the host's docker daemon runs every pod. More: each
    further node is a kubelet with a docker daemon of its own (chaos/kube/nodes.py), so the pods of a drained or
    NotReady node can be rescheduled on another; job node k's pod prefers Kubernetes node k mod cluster_nodes (a
    preferred node affinity: a replacement goes wherever the scheduler finds room)."""
    restart_policy: Literal["Never", "OnFailure"] = "Never"
    """The pod template's restartPolicy. Never: a failed or deleted pod is replaced by the Job controller with a
    new pod. OnFailure: the kubelet restarts a failed container in place (RESTARTS goes up)."""
    backoff_limit: int = Field(default=4, ge=0, le=100)
    """The Job's backoffLimit: failures (pods, or container restarts under OnFailure) before it gives up."""
    grace_s: int = Field(default=10, ge=0, le=3600)
    """The pods' terminationGracePeriodSeconds: SIGTERM, then SIGKILL this much later (Kubernetes' default: 30)."""
    start_timeout_s: float = Field(default=300.0, gt=0, le=24 * 3600)
    """How long a node's pod may be held from starting (unschedulable, its image not pulled, a missing secret, a
    pod the Job may not create: a quota) before the run ends naming why, rather than waiting out timeout_s. Set it
    above the longest a fault keeps a pod from starting on purpose (a drain's cordon) and your image's pull."""
    unreachable_toleration_s: int | None = Field(default=None, ge=0, le=24 * 3600)
    """How long the run's pods stay on a node that went NotReady or unreachable before the taint manager evicts them
    (the tolerationSeconds of the NoExecute taints node.kubernetes.io/not-ready and unreachable). None: the pod
    template's own, else the cluster's default (300 s). A node-notready fault evicts the pods only once the node
    controller has noticed the node (its grace period: 20 s on the local cluster) and this has run out."""
    rdzv_port: int = Field(default=29400, ge=1024, le=65535)
    """The c10d rendezvous port, served by node 0's agent (local: a free one is taken if this is busy)."""
    kubeconfig: str | None = None
    """existing: the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)."""
    context: str | None = None
    """existing: the kubeconfig's context (default: its current-context)."""
    namespace: str | None = None
    """existing: the namespace the run's Jobs are created in; it must exist."""
    pod_template: str | None = None
    """existing: a YAML file holding a Pod, a PodTemplate or a Job whose pod template is yours (image, volumes,
    resources, nodeSelector, tolerations, serviceAccountName). The harness sets, on its container named ``agent``
    (else its first): the command (the node's torchrun agent) and the protocol's environment; on the pod: the
    labels chaos/run and chaos/node, restartPolicy and terminationGracePeriodSeconds. Relative to the experiment
    file or the working directory."""
    shared_dir: str | None = None
    """existing: a directory on this host that every pod mounts at the same path (a shared filesystem: NFS,
    a ReadWriteMany volume); the run directory must be inside it (--runs-dir)."""
    rdzv_host: str | None = None
    """existing: where every pod reaches node 0's agent (the rendezvous endpoint's host)."""
    python: str = "python3"
    """existing: the interpreter in the pod's image, which has torch and this package (pip install chaos-harness)."""

    @model_validator(mode="after")
    def _fields_of_the_mode(self) -> "KubernetesConfig":
        if self.cluster == "existing" and "cluster_nodes" in self.model_fields_set:
            raise ValueError("cluster_nodes only applies to cluster: local (an existing cluster has the nodes it has)")
        if self.cluster == "local":
            given = sorted(f for f in EXISTING_ONLY if f in self.model_fields_set)
            if given:
                raise ValueError(f"{', '.join(given)} only apply to cluster: existing (cluster: local brings up its "
                                 f"own cluster, runs the host's Python and shares the run directory itself)")
            return self
        missing = [f for f in EXISTING_NEEDS if not getattr(self, f)]
        if missing:
            raise ValueError("cluster: existing needs " + "; ".join(f"{f}: {EXISTING_NEEDS[f]}" for f in missing))
        return self
