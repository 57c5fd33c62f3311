"""The local cluster's further nodes: each a kubelet with a docker daemon of its own.

Two kubelets on one docker daemon remove each other's pod containers (each takes the other's for its own orphans),
so a second Kubernetes node on this host needs a second daemon: ``dockerd`` with its own data root, exec root,
socket, config and cgroup parent, on a containerd of its own (dockerd's "managed" one is the host's system
containerd wherever that runs), and no bridge, iptables, NAT or ip_forward change (the pods are on the host's
network, as the first node's are). Its kubelet has its own root and ports (every kubelet has its own dockershim
socket: chaos/kube/minicluster.py), and no per-QoS cgroups: the first kubelet's cleanup of pod cgroups it does
not know would kill this node's pods, so this node's containers stay in the daemon's cgroup parent and are not
limited by the node's allocatable.

The images the pods need (the sandbox's and the host-userland image) are imported into each daemon from this
host, as for the first. In the ledger before each daemon starts, undone in this order: the kubelet killed, the
daemon's containers removed, dockerd and containerd killed, then whatever a daemon that died first left (every
process in the node's cgroups, the shims naming its containerd), then its cgroups; what the daemons mounted lies
under the cluster's kubelet root, which the cluster's own teardown unmounts and removes.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from chaos.errors import HarnessError
from chaos.runtime.hostimage import ensure_host_image
from chaos.runtime.undo import Command

DOCKER_WAIT_S = 60.0
"""How long a further node's docker daemon may take to answer (about 2 s on the 2-core box)."""


@dataclass(frozen=True)
class ExtraNode:
    """Kubernetes node ``index`` (1, 2, ...) of the local cluster, everything it owns under ``home``."""

    index: int
    name: str
    home: Path
    kubelet_port: int
    healthz_port: int

    @property
    def cgroup(self) -> str:
        """The cgroup (in every hierarchy) the node's containers go under: its own, so what is left is found."""
        return f"{self.home.name}-{self.home.parent.name}"

    @property
    def docker_url(self) -> str:
        return f"unix://{self.home / 'docker.sock'}"

    @property
    def containerd_sock(self) -> Path:
        return self.home / "containerd.sock"

    def containerd_argv(self) -> list[str]:
        return ["containerd", f"--config={self.home / 'containerd.toml'}"]

    def containerd_config(self) -> str:
        """The node's own containerd (dockerd's \"managed\" one would be the host's system containerd wherever
        /run/containerd/containerd.sock exists: the node's containers would live among the host's)."""
        h = self.home
        return (f'version = 2\nroot = "{h / "containerd"}"\nstate = "{h / "exec" / "containerd"}"\n'
                f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\noom_score = 0\n'
                f'[grpc]\n  address = "{self.containerd_sock}"\n[ttrpc]\n  address = ""\n[debug]\n  address = ""\n'
                # Its "opt" plugin would make /opt/containerd on the host.
                f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{h / "opt"}"\n')

    def dockerd_argv(self) -> list[str]:
        h = self.home
        return ["dockerd", f"--data-root={h / 'docker'}", f"--exec-root={h / 'exec'}", f"--pidfile={h / 'docker.pid'}",
                f"--host={self.docker_url}", f"--config-file={h / 'daemon.json'}", f"--cgroup-parent=/{self.cgroup}",
                f"--containerd={self.containerd_sock}",
                # The host's network is not this daemon's to change: no bridge, no NAT, no iptables rules.
                "--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false"]

    def leftovers_script(self) -> tuple[str, str]:
        """(kill, probe): what is left of the node's containers once its daemons are gone (a daemon that died, or
        was killed with containers running): every process in its cgroups, then the shims serving them (their
        arguments name the node's containerd socket); the probe finds either."""
        # "[/]run/...": the pattern matches the shims' arguments but not this shell's own, which holds the pattern.
        path = str(self.containerd_sock)
        cg, sock = shlex.quote(self.cgroup), shlex.quote(f"[{path[0]}]{path[1:]}")
        procs = (f"cat {cgroup_dirs(cg, '/cgroup.procs')} {cgroup_dirs(cg, '/*/cgroup.procs')} 2>/dev/null")
        kill = f"{procs} | sort -u | xargs -r kill -KILL 2>/dev/null; pkill -KILL -f -- {sock} ; true"
        probe = f"{procs} | grep -q . || pgrep -f -- {sock} >/dev/null"
        return kill, probe

    def kubelet_extra(self) -> tuple[str, ...]:
        return (f"--docker-endpoint={self.docker_url}", "--cgroups-per-qos=false", "--enforce-node-allocatable=")

    def docker(self) -> Any:
        """A docker SDK client on this node's daemon (it asks the daemon at once: DockerException if it is gone)."""
        import docker

        return docker.DockerClient(base_url=self.docker_url, timeout=30)


def cgroup_dirs(cg: str, under: str = "") -> str:
    """Shell globs of the cgroup ``cg`` in every hierarchy: cgroup v1 (/sys/fs/cgroup/<controller>/cg) and the
    unified v2 one (/sys/fs/cgroup/cg)."""
    return f"/sys/fs/cgroup/*/{cg}{under} /sys/fs/cgroup/{cg}{under}"


def remove_empty_cgroups(name: str) -> Command:
    """The undo that removes cgroup ``name`` and every cgroup below it, in every hierarchy, once they are empty
    (rmdir refuses one with tasks: what still runs stays, and the probe then reports it left)."""
    cg = shlex.quote(name)
    return Command(["sh", "-c", f"for d in {cgroup_dirs(cg)}; do [ -d \"$d\" ] && find \"$d\" -depth -type d "
                                f"-exec rmdir {{}} + 2>/dev/null; done; true"],
                   only_if=["sh", "-c", f"for d in {cgroup_dirs(cg)}; do [ -d \"$d\" ] && exit 0; done; exit 1"])


def plan_extra(cluster: Any, count: int, pick: Callable[[], Any]) -> list[ExtraNode]:
    """Kubernetes nodes 1 .. count-1 of ``cluster`` (a KubeCluster), with ports from ``pick`` (Ports.pick)."""
    out: list[ExtraNode] = []
    taken = set(vars(cluster.ports).values())
    while len(out) < count - 1:
        p = pick()  # each pick's ports are distinct; across picks (and the first node's) they are made so
        if {p.kubelet, p.kubelet_healthz} & taken:
            continue
        taken |= {p.kubelet, p.kubelet_healthz}
        i = len(out) + 1
        out.append(ExtraNode(i, f"{cluster.node}-n{i}", cluster.kubelet_root / f"n{i}", p.kubelet, p.kubelet_healthz))
    return out


def start_docker(cluster: Any, node: ExtraNode) -> subprocess.Popen:
    """Start the node's containerd and docker daemon; the removal of its containers is in the ledger before its
    kubelet starts."""
    node.home.mkdir(parents=True, exist_ok=True)
    # Not the host's /etc/docker/daemon.json. Its data root is under /run, often a tmpfs: the pods write to their
    # hostPath volumes and their output to the run directory, and a container's log is kept small.
    (node.home / "daemon.json").write_text(json.dumps(
        {"log-driver": "json-file", "log-opts": {"max-size": "10m", "max-file": "2"}}) + "\n")
    (node.home / "containerd.toml").write_text(node.containerd_config())
    # Undone last: the containers' cgroups, once they are gone (rmdir refuses one with tasks).
    cluster.run.ledger.push("target", remove_empty_cgroups(node.cgroup))
    kill, probe = node.leftovers_script()
    cluster.run.ledger.push("target", Command(["sh", "-c", kill], only_if=["sh", "-c", probe]))
    cluster._spawn(f"containerd-{node.index}", node.containerd_argv())
    proc = cluster._spawn(f"dockerd-{node.index}", node.dockerd_argv())
    url = shlex.quote(node.docker_url)
    # Undone before the daemon's kill (the ledger runs in reverse) and after the kubelet's (nothing restarts them):
    # the daemon removes them whole; what a dead daemon cannot remove, the kill above ends.
    cluster.run.ledger.push("target", Command(
        ["sh", "-c", f"docker -H {url} ps -aq | xargs -r docker -H {url} rm -f >/dev/null"],
        only_if=["sh", "-c", f"docker -H {url} ps -aq 2>/dev/null | grep -q ."]))
    return proc


def ready_docker(cluster: Any, node: ExtraNode, proc: subprocess.Popen, pause_tar: bytes,
                 pause_image: str) -> None:
    """Wait for the node's daemon to answer, then import the sandbox and host-userland images into it."""
    import docker

    deadline = time.monotonic() + DOCKER_WAIT_S
    while True:
        try:
            client = node.docker()
            client.ping()
            break
        except docker.errors.DockerException:
            if proc.poll() is not None or time.monotonic() > deadline:
                why = f"exited {proc.returncode}" if proc.poll() is not None else f"no answer in {DOCKER_WAIT_S:g} s"
                raise HarnessError(f"node {node.name}'s docker daemon ({node.docker_url}) {why}. Log: "
                                   f"{cluster.logs / f'dockerd-{node.index}.log'}") from None
            time.sleep(0.25)
    try:
        repo, tag = pause_image.split(":")
        client.api.import_image_from_data(pause_tar, repository=repo, tag=tag, changes=['ENTRYPOINT ["/pause"]'])
        ref, _ = ensure_host_image(client)
        cluster.run.log("docker_image", image=pause_image, also=ref, daemon=node.docker_url)
    finally:
        client.close()


def describe(nodes: list[ExtraNode]) -> list[str]:
    return [f"kube: node {n.name}: dockerd {json.dumps(n.docker_url)} (own data root, no bridge/iptables) and its "
            f"kubelet on port {n.kubelet_port}" for n in nodes]
