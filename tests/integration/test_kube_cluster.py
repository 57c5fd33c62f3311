"""The local Kubernetes cluster for real: it comes up, runs a pod on the host's own Python and torch, and its
teardown (the ledger) leaves no daemon, container, mount, cgroup or log behind."""

from __future__ import annotations

import random
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.kube.build import refusal
from chaos.pytest_plugin import HOST_KUBERNETES
from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell

WHY = refusal()
pytestmark = [pytest.mark.xdist_group(HOST_KUBERNETES), pytest.mark.root, pytest.mark.docker, pytest.mark.skipif(WHY is not None, reason=f"{WHY}")]


def leftovers(namespace: str, roots: list[Path], pids: list[int]) -> list[str]:
    import psutil

    found = [f"pid {p} alive" for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    found += [f"container {c}" for c in subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=io.kubernetes.pod.namespace={namespace}"],
        capture_output=True, text=True).stdout.split()]
    mounts = subprocess.run(["findmnt", "-rno", "TARGET"], capture_output=True, text=True).stdout.split("\n")
    found += [f"mount {m}" for m in mounts if any(m.startswith(str(root)) for root in roots)]
    found += [f"directory {roots[-1]}"] if roots[-1].exists() else []
    found += [f"log {p}" for p in Path("/var/log/pods").glob(f"{namespace}_*")]
    return found


@pytest.fixture
def cluster(tmp_path: Path):
    from chaos.kube.minicluster import KubeCluster

    log = HarnessLog(tmp_path / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    kube = KubeCluster(run, tmp_path / "kube", namespace=f"chaos-test-{secrets.token_hex(4)}")
    try:
        kube.start()
        yield kube
    finally:
        failures = run.ledger.revert(run.shell)
        kube.release_lock()
        assert not failures
        assert leftovers(kube.namespace, [kube.root, kube.kubelet_root], list(kube.pids.values())) == []


def test_a_pod_runs_the_hosts_torch_and_the_teardown_leaves_nothing(cluster, tmp_path: Path) -> None:
    import docker
    from kubernetes import client

    from chaos.runtime.hostimage import ensure_host_image, host_binds

    up = [r for r in cluster.run.log.records if r["ev"] == "kube_cluster_up"]
    assert up and up[0]["seconds"] < 120
    dc = docker.from_env()
    image, _ = ensure_host_image(dc)
    dc.close()
    out = tmp_path / "out"
    out.mkdir()
    binds = {**host_binds(), str(out): {"bind": "/out", "mode": "rw"}}
    volumes = [client.V1Volume(name=f"v{i}", host_path=client.V1HostPathVolumeSource(path=src))
               for i, src in enumerate(binds)]
    mounts = [client.V1VolumeMount(name=f"v{i}", mount_path=b["bind"], read_only=b["mode"] == "ro")
              for i, b in enumerate(binds.values())]
    code = "import socket, torch; open('/out/seen', 'w').write(torch.__version__ + ' ' + socket.gethostname())"
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="probe"),
        spec=client.V1PodSpec(host_network=True, restart_policy="Never", volumes=volumes,
                              automount_service_account_token=False,
                              containers=[client.V1Container(name="probe", image=image, image_pull_policy="Never",
                                                             command=[sys.executable, "-c", code],
                                                             volume_mounts=mounts)]))
    core = cluster.core()
    core.create_namespaced_pod(cluster.namespace, pod)
    deadline = time.monotonic() + 90
    phase = None
    while time.monotonic() < deadline:
        phase = core.read_namespaced_pod("probe", cluster.namespace).status.phase
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    assert phase == "Succeeded"
    import torch

    assert (out / "seen").read_text() == f"{torch.__version__} {cluster.node}"  # the host's torch, the host's network
