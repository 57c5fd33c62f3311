"""The local cluster's further nodes without starting them: each a docker daemon of its own that leaves the host's
network alone, a kubelet whose every socket, root and port is its own, and the mapping from a Kubernetes node to
its kubelet and daemon that the faults and the worker records use."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pytest

from chaos.kube.minicluster import KubeCluster, Ports
from chaos.kube.nodes import plan_extra
from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell


@pytest.fixture
def cluster(tmp_path: Path) -> KubeCluster:
    log = HarnessLog(tmp_path / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    kube = KubeCluster(run, tmp_path / "kube", namespace="chaos-abc", node_count=3)
    kube.bin = tmp_path / "bin"
    kube.pki = object()  # type: ignore[assignment]
    kube.extra = plan_extra(kube, 3, Ports.pick)
    return kube


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def test_a_further_nodes_docker_daemon_changes_nothing_of_the_hosts_network_and_keeps_its_state_apart(cluster) -> None:
    first, second = cluster.extra
    for node in (first, second):
        f = _flags(node.dockerd_argv())
        # No bridge, no NAT, no iptables rules, no ip_forward sysctl (dockerd's defaults change all four).
        assert (f["bridge"], f["iptables"], f["ip-masq"], f["ip-forward"]) == ("none", "false", "false", "false")
        assert {f["data-root"], f["exec-root"], f["pidfile"], f["config-file"]} <= {
            str(node.home / x) for x in ("docker", "exec", "docker.pid", "daemon.json")}
        assert f["host"] == node.docker_url == f"unix://{node.home}/docker.sock"
        assert node.home.parent == cluster.kubelet_root
        # Its own containerd, never the host's system one (dockerd would take /run/containerd's where it exists).
        conf = tomllib.loads(node.containerd_config())
        assert f["containerd"] == conf["grpc"]["address"] == str(node.containerd_sock)
        assert all(Path(conf[k]).is_relative_to(node.home) for k in ("root", "state"))
        assert conf["ttrpc"]["address"] == conf["debug"]["address"] == ""
        assert node.containerd_argv() == ["containerd", f"--config={node.home / 'containerd.toml'}"]
        # What is left once the daemons are gone is found and killed by the node's own cgroup and socket only.
        kill, probe = node.leftovers_script()
        for script in (kill, probe):
            assert f"/sys/fs/cgroup/*/{node.cgroup}/" in script and str(node.containerd_sock)[1:] in script
            # Its shim pattern must not match the shell that runs it (pkill would kill its own shell).
            assert str(node.containerd_sock) not in script
    assert first.home != second.home and first.cgroup != second.cgroup
    assert [n.name for n in cluster.extra] == [f"{cluster.node}-n1", f"{cluster.node}-n2"]
    assert cluster.node_names == [cluster.node, f"{cluster.node}-n1", f"{cluster.node}-n2"]


def test_each_kubelet_has_its_own_sockets_roots_and_ports(cluster) -> None:
    argvs = {name: _flags(cluster.argv(name)) for name in ("kubelet", "kubelet-1", "kubelet-2")}
    for key in ("hostname-override", "root-dir", "cert-dir", "port", "healthz-port"):
        assert len({f[key] for f in argvs.values()}) == 3, key
    for name in ("kubelet-1", "kubelet-2"):
        f = argvs[name]
        assert f["docker-endpoint"] != f["container-runtime-endpoint"]
        assert f["cgroups-per-qos"] == "false" and f["enforce-node-allocatable"] == ""
    # The first node is the host's daemon with per-QoS cgroups, as a one-node cluster's.
    assert "docker-endpoint" not in argvs["kubelet"] and "cgroups-per-qos" not in argvs["kubelet"]
    # Every kubelet's dockershim socket and checkpoints are its own, none at the host's default paths.
    for key in ("container-runtime-endpoint", "experimental-dockershim-root-directory"):
        values = {f[key] for f in argvs.values()}
        assert len(values) == 3 and not values & {"unix:///var/run/dockershim.sock", "/var/lib/dockershim"}, key
    assert all(f["container-runtime-endpoint"] == f["image-service-endpoint"] for f in argvs.values())
    with pytest.raises(ValueError):
        cluster.argv("kubelet-3")


def test_further_nodes_ports_are_distinct_from_each_other_and_the_first_nodes(tmp_path: Path) -> None:
    """Each pick's ports are distinct, but two picks may hand out the same free port again."""
    log = HarnessLog(tmp_path / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    kube = KubeCluster(run, tmp_path / "kube", namespace="chaos-abc", node_count=3)
    kube.ports = Ports(1, 2, 3, 4, 5)
    picks = iter([Ports(9, 9, 9, 4, 10), Ports(9, 9, 9, 11, 12), Ports(9, 9, 9, 12, 13), Ports(9, 9, 9, 14, 15)])
    extra = plan_extra(kube, 3, lambda: next(picks))
    ports = [(n.kubelet_port, n.healthz_port) for n in extra]
    assert ports == [(11, 12), (14, 15)]  # 4 is the first node's kubelet; 12 the first further node's


def test_a_kubernetes_node_maps_to_its_own_kubelet_and_docker_daemon(cluster, monkeypatch) -> None:
    cluster.pids = {"kubelet": 10, "kubelet-1": 11, "kubelet-2": 12}
    assert [cluster.kubelet_pid(n) for n in cluster.node_names] == [10, 11, 12]
    assert cluster.kubelet_pid("another-node") is None
    made = []
    monkeypatch.setattr("docker.DockerClient", lambda base_url, timeout: made.append(base_url) or "client")
    monkeypatch.setattr("docker.from_env", lambda: "host")
    assert cluster.docker(cluster.node) == "host" and cluster.docker(None) == "host"
    assert cluster.docker(f"{cluster.node}-n2") == "client" and made == [cluster.extra[1].docker_url]


def test_the_plan_says_how_many_further_nodes_start_and_then_which(tmp_path: Path, cluster) -> None:
    log = HarnessLog(tmp_path / "h.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    assert not any("further" in line for line in KubeCluster(run, tmp_path / "k", "chaos-x").plan())
    assert any("2 further node(s)" in line for line in KubeCluster(run, tmp_path / "k", "chaos-x", node_count=3).plan())
    cluster.pki = None  # before the keys: the daemons by name
    named = [line for line in cluster.plan() if "dockerd" in line]
    assert [n.name in line for n, line in zip(cluster.extra, named)] == [True, True]
