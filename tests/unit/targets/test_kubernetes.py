"""The kubernetes target's bookkeeping without a cluster: a Job's state as an exit code, the refusals before
launch (no build, a node that does not exist), the cached build's READY rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.errors import CapabilityError
from chaos.faults.pod_delete import PodDelete, PodDeleteConfig
from chaos.kube import build
from chaos.targets.kubernetes import Kubernetes, KubernetesConfig, job_code


def _status(succeeded=None, conditions=()):
    return SimpleNamespace(succeeded=succeeded, conditions=[SimpleNamespace(type=t, status=s) for t, s in conditions])


def test_a_job_is_running_until_it_succeeded_or_its_controller_gave_it_up() -> None:
    assert job_code(_status()) is None
    assert job_code(_status(conditions=[("Failed", "False")])) is None  # a failed pod the controller replaces
    assert job_code(_status(succeeded=1)) == 0
    assert job_code(_status(conditions=[("Failed", "True")])) == 1  # backoffLimit used up


def test_without_a_cached_build_the_target_is_refused_naming_the_script(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("chaos.targets.base.check_launcher", lambda run: None)
    with pytest.raises(CapabilityError, match="scripts/kube-build.sh"):
        Kubernetes(KubernetesConfig()).check(SimpleNamespace())


def test_a_build_counts_only_when_ready_was_written_and_every_binary_is_there(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    key = tmp_path / "v-1"
    (key / "bin").mkdir(parents=True)
    (tmp_path / "current").symlink_to(key)
    for name in build.BINARIES:
        (key / "bin" / name).write_text("#!/bin/sh\n")
        (key / "bin" / name).chmod(0o755)
    assert build.built() is None  # a killed build: no READY
    (key / "READY").write_text("")
    assert build.built() == key / "bin"
    (key / "bin" / "kubelet").unlink()
    assert build.built() is None


def test_a_pod_delete_of_a_node_the_job_does_not_have_is_refused_before_launch() -> None:
    run = SimpleNamespace(target=Kubernetes(KubernetesConfig(nodes=2)))
    PodDelete(PodDeleteConfig(node=1), 0).check(run)
    with pytest.raises(CapabilityError, match="node 2 does not exist"):
        PodDelete(PodDeleteConfig(node=2), 0).check(run)


def test_further_cluster_nodes_are_the_local_clusters_alone() -> None:
    from pydantic import ValidationError

    assert KubernetesConfig().cluster_nodes == 1
    assert KubernetesConfig(cluster_nodes=3).cluster_nodes == 3
    with pytest.raises(ValidationError, match="cluster_nodes only applies to cluster: local"):
        KubernetesConfig(cluster="existing", cluster_nodes=2, namespace="n", pod_template="p.yaml", shared_dir="/s",
                         rdzv_host="h")
    with pytest.raises(ValidationError):
        KubernetesConfig(cluster_nodes=0)


def test_kubernetes_experiments_share_a_golden_run_unless_the_ranks_layout_differs() -> None:
    """A fault-free run computes the same whatever the cluster does after a fault (the pods' restart policy,
    backoffLimit, grace, toleration of a lost node, how many Kubernetes nodes there are): one golden run serves
    them. The job's nodes, its ranks per node and the mode are the computation's, and keep theirs apart."""
    from chaos.spec.load import load_experiment

    def key(target: str, nproc: int = 1) -> str:
        text = (f"name: e\nworkload: {{script: workloads/ddp.py, nproc_per_node: {nproc}, args: {{steps: 5}}}}\n"
                f"target: {target}\nchecks: [{{completes: {{}}}}]\n")
        return load_experiment(Path("experiments/x.yaml"), text).workload_hash()

    plain = key("{kind: kubernetes, nodes: 2}")
    assert key("{kind: kubernetes, nodes: 2, cluster_nodes: 2, restart_policy: OnFailure, backoff_limit: 0, "
               "grace_s: 1, start_timeout_s: 60, unreachable_toleration_s: 5, rdzv_port: 29500}") == plain
    assert key("{kind: kubernetes, nodes: 3}") != plain
    assert key("{kind: kubernetes, nodes: 2}", nproc=2) != plain
