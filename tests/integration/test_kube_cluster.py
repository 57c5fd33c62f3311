"""The local Kubernetes cluster for real: it comes up, runs a pod on the host's own Python and torch, and its
teardown (the ledger) leaves no daemon, container, mount, cgroup or log behind."""

from __future__ import annotations

import os
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
    # A further node's daemon's shims and containers name its exec root (under the kubelet root) in their arguments.
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] != "zombie" and any(str(root) in cmd for root in roots[1:]):
            found.append(f"process {proc.pid} {cmd[:120]}")
    found += [f"container {c}" for c in subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=io.kubernetes.pod.namespace={namespace}"],
        capture_output=True, text=True).stdout.split()]
    mounts = subprocess.run(["findmnt", "-rno", "TARGET"], capture_output=True, text=True).stdout.split("\n")
    found += [f"mount {m}" for m in mounts if any(m.startswith(str(root)) for root in roots)]
    found += [f"directory {roots[-1]}"] if roots[-1].exists() else []
    found += [f"log {p}" for p in Path("/var/log/pods").glob(f"{namespace}_*")]
    return found


HOST_PATHS = (Path("/var/run/dockershim.sock"), Path("/var/lib/dockershim"), Path("/var/lib/kubelet"))
"""What a kubelet makes on the host by default: the run's cluster must leave each as it found it."""


def host_paths() -> dict[str, bool]:
    return {str(p): p.exists() for p in HOST_PATHS}


@pytest.fixture
def cluster(tmp_path: Path):
    from chaos.kube.minicluster import KubeCluster

    log = HarnessLog(tmp_path / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    kube = KubeCluster(run, tmp_path / "kube", namespace=f"chaos-test-{secrets.token_hex(4)}")
    before = host_paths()
    try:
        kube.start()
        yield kube
    finally:
        failures = run.ledger.revert(run.shell)
        kube.release_lock()
        assert not failures
        assert leftovers(kube.namespace, [kube.root, kube.kubelet_root], list(kube.pids.values())) == []
        assert host_paths() == before


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


# A child that brings up a two-node cluster, runs a pod on the second node (its own docker daemon), says where
# everything is and waits to be killed: the harness SIGKILLed mid-run.
OWNER = r"""
import json, random, sys, time
from pathlib import Path
from chaos.kube.minicluster import PAUSE_IMAGE, KubeCluster
from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell

tmp = Path(sys.argv[1])
log = HarnessLog(tmp / "harness.jsonl")
run = RunContext(experiment=None, run_dir=tmp, ckpt_dir=tmp, ledger=Ledger(tmp), shell=Shell(log), log=log,
                 rng=random.Random(0))
kube = KubeCluster(run, tmp / "kube", namespace=sys.argv[2], node_count=2)
kube.start()
second = kube.extra[0]
client = second.docker()
kube.core().create_namespaced_pod(kube.namespace, {"metadata": {"name": "sleeper"}, "spec": {
    "nodeName": second.name, "hostNetwork": True, "automountServiceAccountToken": False,
    "containers": [{"name": "s", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}})
deadline = time.monotonic() + 90
while kube.core().read_namespaced_pod("sleeper", kube.namespace).status.phase != "Running":
    assert time.monotonic() < deadline, "the pod on the second node did not start"
    time.sleep(0.5)
ids = [c.id for c in client.containers.list(filters={"label": f"io.kubernetes.pod.namespace={kube.namespace}"})]
print(json.dumps({"pids": list(kube.pids.values()), "roots": [str(kube.root), str(kube.kubelet_root)],
                  "nodes": kube.node_names, "on_second": ids, "docker": second.docker_url}), flush=True)
time.sleep(600)
"""


def test_a_second_node_has_its_own_docker_daemon_and_a_sigkilled_owner_leaves_nothing_cleanup_cannot_remove(
        tmp_path: Path) -> None:
    """Two kubelets on one docker daemon remove each other's pods, so the second node runs its own daemon: its pod's
    container is there and not in the host's. A harness SIGKILLed with both nodes up leaves the daemons, the pod and
    the mounts running; ``chaos cleanup`` of the run (its ledger) removes every one of them."""
    import json
    import signal

    import psutil

    namespace = f"chaos-test-{secrets.token_hex(4)}"
    before = host_paths()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path), namespace], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        line = owner.stdout.readline()
        assert line, f"the cluster's owner exited {owner.wait()} before its cluster was up"
        seen = json.loads(line)
        assert seen["nodes"][1] == f"{seen['nodes'][0]}-n1"
        assert seen["on_second"], "the pod on the second node has no container in that node's docker daemon"
        host = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter",
                               f"label=io.kubernetes.pod.namespace={namespace}"], capture_output=True, text=True)
        assert not set(seen["on_second"]) & set(host.stdout.split()), "the second node's pod ran in the host's daemon"
        dockerd = [p for p in psutil.process_iter(["cmdline"]) if f"--host={seen['docker']}" in (p.info["cmdline"] or [])]
        assert dockerd, "the second node's docker daemon is not running"
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        assert all(p.is_running() for p in dockerd), "the daemon died with its owner: nothing left to prove cleanup on"
        # The worst case: the node's docker daemon and containerd die too (crashed, OOM-killed). Its pod's processes
        # run on under their shims, and no daemon is left to remove them.
        home = seen["docker"].removeprefix("unix://").rsplit("/", 1)[0]
        daemons = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] in (
            "dockerd", "containerd") and any(home in a for a in p.info["cmdline"])]
        assert len(daemons) == 2, daemons
        for p in daemons:
            p.kill()
        psutil.wait_procs(daemons, timeout=10)
        shims = [p for p in psutil.process_iter(["cmdline"]) if any(home in a for a in p.info["cmdline"] or [])]
        assert shims, "the pod's shims died with the daemons: nothing left to prove cleanup on"
        res = subprocess.run([sys.executable, "-m", "chaos", "cleanup", str(tmp_path)], capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        left = leftovers(namespace, [Path(r) for r in seen["roots"]], seen["pids"] + [p.pid for p in dockerd])
        assert left == [], left
        cgroups = list(Path("/sys/fs/cgroup").glob(f"*/n1-{Path(seen['roots'][1]).name}"))
        assert cgroups == [], f"the second node's containers' cgroups are left: {cgroups}"
        assert host_paths() == before
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
            owner.wait()
        if not Ledger(tmp_path).closed:
            Ledger(tmp_path).revert(Shell(HarnessLog(tmp_path / "cleanup.jsonl")))
