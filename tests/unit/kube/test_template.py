"""The user's pod as the run's Jobs carry it: what is kept of the user's, what the run sets, and every way a
template file can be wrong, each refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from chaos.errors import CapabilityError
from chaos.kube.template import load_template, pod_template, prefer

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"team": "a"}},
       "spec": {"nodeSelector": {"gpu": "h100"}, "containers": [
           {"name": "sidecar", "image": "envoy"},
           {"name": "agent", "image": "trainer:1", "args": ["--old"], "env": [
               {"name": "USERS", "value": "kept"}, {"name": "CHAOS_HOST", "value": "overridden"},
               {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}


def _write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "pod.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("wrap", [
    lambda p: p,
    lambda p: {"apiVersion": "v1", "kind": "PodTemplate", "template": {"metadata": p["metadata"], "spec": p["spec"]}},
    lambda p: {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"metadata": p["metadata"],
                                                                              "spec": p["spec"]}}},
    lambda p: {"metadata": p["metadata"], "spec": p["spec"]},
])
def test_a_pod_a_pod_template_a_job_or_a_bare_template_give_the_same_pod(tmp_path: Path, wrap) -> None:
    template = load_template(_write(tmp_path, wrap(POD)))
    assert template["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert template["metadata"] == {"labels": {"team": "a"}}  # not the name: each Job names its own pods


def test_the_run_sets_the_agent_and_keeps_the_rest_of_the_users_pod(tmp_path: Path) -> None:
    template = load_template(_write(tmp_path, POD))
    pod = pod_template(template, labels={"chaos/run": "r", "chaos/node": "node1"}, command=["/bin/sh", "-c", "go"],
                       env={"CHAOS_HOST": "node1", "CHAOS_RUN_DIR": "/shared/run"}, restart_policy="OnFailure",
                       grace_s=7)
    sidecar, agent = pod["spec"]["containers"]
    assert sidecar == {"name": "sidecar", "image": "envoy"}  # the container named agent is the agent's
    assert agent["command"] == ["/bin/sh", "-c", "go"] and "args" not in agent and agent["image"] == "trainer:1"
    env = {e["name"]: e for e in agent["env"]}
    assert env["USERS"]["value"] == "kept" and "valueFrom" in env["FROM_SECRET"]
    assert env["CHAOS_HOST"]["value"] == "node1" and len(agent["env"]) == 4  # the run's value, once
    assert pod["metadata"]["labels"] == {"team": "a", "chaos/run": "r", "chaos/node": "node1"}
    assert pod["spec"]["restartPolicy"] == "OnFailure" and pod["spec"]["terminationGracePeriodSeconds"] == 7
    assert template["spec"]["containers"][1]["args"] == ["--old"], "the loaded template is not changed"


def test_without_a_container_named_agent_the_first_one_runs_it(tmp_path: Path) -> None:
    doc = {"spec": {"containers": [{"name": "trainer", "image": "t"}, {"name": "log", "image": "l"}]}}
    pod = pod_template(load_template(_write(tmp_path, doc)), labels={}, command=["x"], env={}, restart_policy="Never",
                       grace_s=1)
    assert pod["spec"]["containers"][0]["command"] == ["x"] and "command" not in pod["spec"]["containers"][1]


@pytest.mark.parametrize("doc, problem", [
    ("spec: [unclosed", "not valid YAML"),
    ("- a\n- b\n", "expected a Pod, PodTemplate or Job manifest, got list"),
    ({"kind": "Deployment", "spec": {}}, "kind Deployment is not a Pod, PodTemplate or Job"),
    ({"kind": "Pod", "spec": {"containers": []}}, "the pod has no containers"),
    ({"kind": "Job", "spec": {}}, "the pod has no containers"),
    ({"kind": "Pod", "spec": {"containers": ["agent"]}}, "the pod has no containers"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "agent"}]}}, "container agent has no image"),
])
def test_a_broken_template_is_refused_naming_what_is_wrong(tmp_path: Path, doc, problem) -> None:
    with pytest.raises(CapabilityError, match=problem):
        load_template(_write(tmp_path, doc))


def test_an_unreadable_template_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match="cannot read it"):
        load_template(tmp_path / "missing.yaml")


def test_an_exported_jobs_controller_labels_are_left_out(tmp_path: Path) -> None:
    """kubectl get job -o yaml: its template carries the old Job's controller-uid and job-name, which a new Job's
    generated selector would not match (the API server refuses it)."""
    labels = {"team": "a", "controller-uid": "1f0c", "job-name": "old", "batch.kubernetes.io/job-name": "old"}
    doc = {"kind": "Job", "spec": {"template": {"metadata": {"labels": labels}, "spec": POD["spec"]}}}
    assert load_template(_write(tmp_path, doc))["metadata"]["labels"] == {"team": "a"}


def test_the_pods_toleration_of_a_node_gone_is_the_runs_when_it_sets_one(tmp_path: Path) -> None:
    mine = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 900}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    schedule = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}
    template = load_template(_write(tmp_path, {**POD, "spec": {**POD["spec"], "tolerations": [gpu, mine, schedule]}}))
    args = dict(labels={}, command=["x"], env={}, restart_policy="Never", grace_s=1)
    assert pod_template(template, **args)["spec"]["tolerations"] == [gpu, mine, schedule], "unset: the template's own"
    tolerations = pod_template(template, **args, unreachable_toleration_s=0)["spec"]["tolerations"]
    assert tolerations[:2] == [gpu, schedule] and len(tolerations) == 4, "a NoSchedule toleration is not replaced"
    assert {(t["key"], t["effect"], t["tolerationSeconds"]) for t in tolerations[2:]} == {
        ("node.kubernetes.io/not-ready", "NoExecute", 0), ("node.kubernetes.io/unreachable", "NoExecute", 0)}


def test_a_preferred_node_is_asked_for_not_required(tmp_path: Path) -> None:
    """On a cluster of several nodes each job node's pod prefers its own Kubernetes node; a replacement of an evicted
    pod must still be free to go elsewhere, so the affinity is preferred, never required, and the user's stays."""
    mine = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}
    pod = {"spec": {"affinity": {"nodeAffinity": dict(mine)}, "containers": [{"name": "agent"}]}}
    prefer(pod, "vm-n1")
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == mine["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [{"weight": 100, "preference": {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["vm-n1"]}]}}]
