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
