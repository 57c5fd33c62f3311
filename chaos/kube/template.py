"""The user's pod, as the run's Jobs carry it (``cluster: existing``).

The user owns what the pod is (image, volumes, resources, scheduling, service account); the harness sets only
what the experiment decides: the agent container's command and the protocol's environment, the pod's labels,
restartPolicy and grace period. A Pod, a PodTemplate, a Job or a bare {metadata, spec} are all accepted, so the
manifest a team already has can be pointed at as it is.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import CapabilityError
from chaos.runtime.context import RunContext
from chaos.runtime.hostimage import host_binds
from chaos.runtime.launch import PACKAGE_ROOT, workload_cwd

AGENT = "agent"
"""The container the harness runs the torchrun agent in: the one named so, else the template's first."""


def load_template(path: Path) -> dict[str, Any]:
    """The pod template ({metadata, spec}) in the YAML file at ``path``; CapabilityError saying what is wrong."""
    where = f"target.pod_template {path}"
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise CapabilityError(f"{where}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise CapabilityError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise CapabilityError(f"{where}: expected a Pod, PodTemplate or Job manifest, got {type(doc).__name__}")
    kind = doc.get("kind")
    if kind == "Job":
        doc = (doc.get("spec") or {}).get("template") or {}
    elif kind == "PodTemplate":
        doc = doc.get("template") or {}
    elif kind not in (None, "Pod"):
        raise CapabilityError(f"{where}: kind {kind} is not a Pod, PodTemplate or Job")
    spec = doc.get("spec") if isinstance(doc, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        raise CapabilityError(f"{where}: the pod has no containers (spec.containers)")
    agent = agent_container(containers)
    if not agent.get("image"):
        raise CapabilityError(f"{where}: container {agent.get('name', '#0')} has no image")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    kept = {k: v for k, v in meta.items() if k in ("labels", "annotations") and isinstance(v, dict)}
    # A Job exported from a cluster (kubectl get job -o yaml) carries its controller's labels in the template: a new
    # Job with them fails validation (its selector is generated), so they go.
    kept["labels"] = {k: v for k, v in (kept.get("labels") or {}).items()
                      if k not in ("controller-uid", "job-name") and not k.startswith("batch.kubernetes.io/")}
    return {"metadata": kept, "spec": spec}


def agent_container(containers: list[dict[str, Any]]) -> dict[str, Any]:
    return next((c for c in containers if c.get("name") == AGENT), containers[0])


NODE_GONE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""The NoExecute taints the node controller puts on a node that stopped posting its status."""


def pod_template(template: dict[str, Any], *, labels: dict[str, str], command: list[str], env: dict[str, str],
                 restart_policy: str, grace_s: int, unreachable_toleration_s: int | None = None) -> dict[str, Any]:
    """The template with the run's parts set; the user's own labels and variables kept unless the run's override."""
    pod = copy.deepcopy(template)
    meta = pod.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    spec = pod["spec"]
    spec["restartPolicy"] = restart_policy
    spec["terminationGracePeriodSeconds"] = grace_s
    agent = agent_container(spec["containers"])
    agent.setdefault("name", AGENT)
    agent["command"] = command
    agent.pop("args", None)
    own = [e for e in agent.get("env") or [] if isinstance(e, dict) and e.get("name") not in env]
    agent["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
    if unreachable_toleration_s is not None:
        # The run's toleration replaces the template's of the same taints for NoExecute (a NoSchedule one stays).
        kept = [t for t in spec.get("tolerations") or [] if not (
            isinstance(t, dict) and t.get("key") in NODE_GONE_TAINTS and t.get("effect") in (None, "", "NoExecute"))]
        spec["tolerations"] = kept + [{"key": key, "operator": "Exists", "effect": "NoExecute",
                                       "tolerationSeconds": unreachable_toleration_s} for key in NODE_GONE_TAINTS]
    return pod


def prefer(pod: dict[str, Any], node: str) -> None:
    """Ask the scheduler to place ``pod`` on Kubernetes node ``node`` if it can (a preferred node affinity, which
    outweighs the default scores): a replacement of it still goes wherever there is room."""
    pod["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {}).setdefault(
        "preferredDuringSchedulingIgnoredDuringExecution", []).append(
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}})


def host_template(run: RunContext, image: str) -> dict[str, Any]:
    """The local cluster's pod: the host's userland, the code and the run directory as hostPath volumes."""
    binds = {src: (b["bind"], b["mode"] == "ro") for src, b in host_binds().items()}
    script = run.experiment.resolve_script()  # None for a workload given as a command
    for path in (str(PACKAGE_ROOT), workload_cwd(run) or "", str(script.parent) if script else ""):
        if path and not any(path == s or path.startswith(s.rstrip("/") + "/") for s in binds):
            binds[path] = (path, True)
    for path in (str(run.run_dir.resolve()), str(run.ckpt_dir.resolve())):
        binds[path] = (path, False)
    items = sorted(binds.items())
    return {"metadata": {}, "spec": {
        "containers": [{"name": AGENT, "image": image, "imagePullPolicy": "Never",
                        "workingDir": workload_cwd(run) or str(run.run_dir.resolve()),
                        "volumeMounts": [{"name": f"v{i}", "mountPath": dst, "readOnly": ro}
                                         for i, (_, (dst, ro)) in enumerate(items)]}],
        "volumes": [{"name": f"v{i}", "hostPath": {"path": src}} for i, (src, _) in enumerate(items)],
        "hostNetwork": True, "hostPID": True, "automountServiceAccountToken": False}}
