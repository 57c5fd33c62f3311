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


def test_several_kubeconfig_files_are_merged_as_kubectl_merges_them(tmp_path: Path, monkeypatch) -> None:
    """$KUBECONFIG=a:b: the cluster and user in one file, the context in another, a missing file skipped."""
    (tmp_path / "a").write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.1.2.3:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n")
    (tmp_path / "b").write_text(
        "apiVersion: v1\nkind: Config\ncontexts: [{name: staging, context: {cluster: c, user: u}}]\n"
        "current-context: staging\n")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'missing'}:{tmp_path / 'b'}")
    cluster = ExistingCluster(None, None, "ml")
    assert cluster.kubeconfig == f"{tmp_path / 'a'}:{tmp_path / 'missing'}:{tmp_path / 'b'}"
    assert cluster._client().configuration.host == "https://10.1.2.3:6443"
    monkeypatch.chdir(tmp_path)  # relative files made absolute: the ledger's undo may run from anywhere
    assert ExistingCluster("a:b", None, "ml").kubeconfig == f"{tmp_path / 'a'}:{tmp_path / 'b'}"
    with pytest.raises(CapabilityError, match="no readable kubeconfig at .*missing.*nowhere"):
        ExistingCluster(f"{tmp_path / 'missing'}:{tmp_path / 'nowhere'}", None, "ml").connect()


def test_a_shared_dir_through_a_symlink_is_named_to_the_pods_as_the_setting_writes_it(tmp_path: Path) -> None:
    """/shared -> /mnt/nfs/team on this host: the harness's resolved paths go to the pods under /shared, where they
    mount the filesystem; a path that only starts with the same letters is left alone."""
    real = tmp_path / "mnt" / "team"
    real.mkdir(parents=True)
    (tmp_path / "shared").symlink_to(real)
    target = Kubernetes(KubernetesConfig(cluster="existing", namespace="ml", pod_template="p.yaml",
                                         shared_dir=str(tmp_path / "shared"), rdzv_host="h"))
    cmd = f"CHAOS_RUN_DIR={real}/runs/r1 python -m x '{real}' {real}2/other"
    assert target.as_nodes_see(cmd) == (f"CHAOS_RUN_DIR={tmp_path}/shared/runs/r1 python -m x '{tmp_path}/shared' "
                                         f"{real}2/other")
    # Only a whole path: after a separator (space, quote, =, :) and up to one; PYTHONPATH's entries too.
    assert target.as_nodes_see(f"--data /scratch{real}/x PYTHONPATH={real}:/opt") == (
        f"--data /scratch{real}/x PYTHONPATH={tmp_path}/shared:/opt")
    plain = Kubernetes(KubernetesConfig(cluster="existing", namespace="ml", pod_template="p.yaml",
                                        shared_dir=str(real), rdzv_host="h"))
    assert plain.as_nodes_see(cmd) == cmd
    assert Kubernetes(KubernetesConfig()).as_nodes_see(cmd) == cmd  # the local cluster: this host's own paths


def test_two_runs_whose_short_labels_collide_never_select_each_others_jobs(tmp_path: Path, monkeypatch) -> None:
    """chaos/run is 6 hex digits (the Jobs' names); what the run deletes by also holds its whole identity."""
    import chaos.runtime.network as network

    monkeypatch.setattr(network, "short_id", lambda run_dir: "ab12cd")
    target = Kubernetes(KubernetesConfig())
    one, two = SimpleNamespace(run_dir=tmp_path / "r1"), SimpleNamespace(run_dir=tmp_path / "r2")
    assert target.prefix(one) == target.prefix(two) == "chaos-ab12cd"
    assert target.selector(one) != target.selector(two)
    assert target.selector(one) == f"chaos/run=chaos-ab12cd,chaos/run-uid={target.run_uid(one)}"
    assert len(target.run_uid(one)) == 40 and target.run_uid(one) == target.run_uid(SimpleNamespace(run_dir=tmp_path / "r1"))
