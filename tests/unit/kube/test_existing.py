"""The existing-cluster mode's bookkeeping without a cluster: what a config must say, how a permission is named,
which faults a run may do there, the undo commands' arguments, and a kubeconfig that is not there."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from chaos.errors import CapabilityError
from chaos.kube import ctl
from chaos.kube.existing import ExistingCluster, Permission
from chaos.targets.kubernetes import EXISTING_FAULTS, Kubernetes, KubernetesConfig

EXISTING = {"cluster": "existing", "namespace": "ml", "pod_template": "pod.yaml", "shared_dir": "/shared",
            "rdzv_host": "trainer-rdzv.ml.svc"}


def test_an_existing_cluster_needs_where_the_run_goes_and_how_its_pods_meet() -> None:
    KubernetesConfig(**EXISTING)
    with pytest.raises(ValidationError) as err:
        KubernetesConfig(cluster="existing")
    text = str(err.value)
    for field in ("namespace", "pod_template", "shared_dir", "rdzv_host"):
        assert f"{field}:" in text, field


@pytest.mark.parametrize("field", ["kubeconfig", "context", "namespace", "pod_template", "shared_dir", "rdzv_host",
                                   "python"])
def test_the_local_cluster_refuses_what_only_describes_a_cluster_of_yours(field) -> None:
    with pytest.raises(ValidationError, match=f"{field} only apply to cluster: existing"):
        KubernetesConfig(**{field: "x"})


def test_permissions_are_named_as_kubectl_auth_can_i_names_them() -> None:
    assert str(Permission("create", "jobs", "batch")) == "create jobs.batch"
    assert str(Permission("create", "pods", subresource="exec")) == "create pods/exec"
    assert str(Permission("patch", "nodes", namespaced=False)) == "patch nodes (cluster-wide)"


def test_only_faults_through_the_api_are_admitted_on_a_cluster_of_yours() -> None:
    target = Kubernetes(KubernetesConfig(**EXISTING))
    asked: list = []
    target.cluster = SimpleNamespace(require=lambda perms, what: asked.append((what, [str(p) for p in perms])))
    target.admit(SimpleNamespace(), "pod-delete", None)
    target.admit(SimpleNamespace(), "node-drain", None)
    assert asked == [("fault pod-delete", ["delete pods"]),
                     ("fault node-drain", ["get nodes (cluster-wide)", "patch nodes (cluster-wide)",
                                           "create pods/eviction"])]
    for kind in ("straggler", "storage-full", "corrupt-checkpoint", "nan-loss"):
        with pytest.raises(CapabilityError, match=f"fault {kind} on an existing cluster.*acts on this host"):
            target.admit(SimpleNamespace(), kind, None)
    assert set(EXISTING_FAULTS) == {"pod-delete", "container-kill", "node-drain", "kill-rank", "hang-rank"}
    # Exec over a websocket is a GET (get pods/exec; create too from Kubernetes 1.35), and its undo reads the pod.
    asked.clear()
    target.admit(SimpleNamespace(), "hang-rank", None)
    assert asked == [("fault hang-rank", ["get pods/exec", "create pods/exec", "get pods"])]
    # The local cluster admits every fault (its pods are this host's processes).
    Kubernetes(KubernetesConfig()).admit(SimpleNamespace(), "straggler", None)


def test_a_missing_kubeconfig_is_refused_naming_the_setting(tmp_path: Path) -> None:
    cluster = ExistingCluster(str(tmp_path / "nope"), None, "ml")
    with pytest.raises(CapabilityError, match="no readable kubeconfig at .*nope; set target.kubeconfig"):
        cluster.connect()
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n")
    with pytest.raises(CapabilityError, match="cannot be used with context nowhere"):
        ExistingCluster(str(broken), "nowhere", "ml").connect()


def test_the_undo_commands_parse_their_arguments() -> None:
    args = ctl.parse(["delete-jobs", "/k", "ml", "chaos/run=chaos-ab", "--context", "staging"])
    assert (args.verb, args.kubeconfig, args.namespace, args.selector, args.context) == (
        "delete-jobs", "/k", "ml", "chaos/run=chaos-ab", "staging")
    args = ctl.parse(["exec", "/k", "ml", "pod-1", "agent", "--", "python", "-m", "x", "--flag"])
    assert (args.pod, args.container, args.argv, args.context) == ("pod-1", "agent", ["python", "-m", "x", "--flag"],
                                                                   None)
    args = ctl.parse(["uncordon", "/k", "node-a", "chaos-ab"])
    assert (args.node, args.owner) == ("node-a", "chaos-ab")
    with pytest.raises(SystemExit):
        ctl.parse(["uncordon", "/k", "node-a"])  # no owner: never a cordon of anyone's


def test_an_unreachable_cluster_makes_a_probe_say_what_keeps_a_cleanup_honest(tmp_path: Path) -> None:
    """What a probe cannot see is still there (an expired token, a network down): the undo is tried and the
    cleanup reports what it could not do, instead of closing the ledger on a cordoned node or a stopped rank."""
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
                      "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: "
                      "{cluster: c, user: u}}]\n")
    assert ctl.main(["jobs-left", str(config), "ml", "chaos/run=x"]) == 0
    assert ctl.main(["cordoned", str(config), "node-a", "chaos-ab"]) == 0
    assert ctl.main(["running", str(config), "ml", "pod"]) == 0
    assert ctl.main(["delete-jobs", str(config), "ml", "chaos/run=x"]) == 3
    assert ctl.main(["uncordon", str(config), "node-a", "chaos-ab"]) == 3
    # The run's own local cluster, down after its teardown: nothing of it is left.
    assert ctl.main(["cordoned", str(config), "node-a", "chaos-ab", "--gone-if-unreachable"]) == 1
    assert ctl.main(["uncordon", str(config), "node-a", "chaos-ab", "--gone-if-unreachable"]) == 0
