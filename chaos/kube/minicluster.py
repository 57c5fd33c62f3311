"""A throwaway but real Kubernetes for one run: etcd, the API server, the controller manager, the scheduler and a
kubelet whose dockershim runs the pods in this host's docker daemon; with ``node_count`` above 1, further nodes,
each a kubelet with a docker daemon of its own (chaos/kube/nodes.py).

Everything listens on 127.0.0.1 on free ports, with keys made for the run (chaos/kube/pki.py) and state in the
run directory. The host is left as it was: the kubelet is built never to rewrite sysctls nor to set a negative
oom_score_adj (scripts/kube/patches), and runs with iptables chains, hairpin NAT, cluster DNS and image garbage
collection off. Each daemon's kill, and the removal of what the kubelet leaves (its pods' containers, its
volume mounts, its pods' cgroups and logs), is in the ledger before it starts, so a run that fails, a Ctrl-C
and ``chaos cleanup`` after a SIGKILL all take it down the same way.

One cluster per host at a time: two kubelets on one docker daemon remove each other's pod containers. A run
waits for the host's lock (``/run/chaos-kube.lock``) and refuses to start beside a kubelet it did not start.

Measured on a 2-core Debian 12 box: node Ready about 10-25 s after etcd starts (docs/kubernetes.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shlex
import socket
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import psutil

from chaos.errors import CapabilityError, HarnessError
from chaos.kube.build import built, foreign_kubelet, refusal
from chaos.kube.nodes import ExtraNode, describe, plan_extra, ready_docker, remove_empty_cgroups, start_docker
from chaos.kube.pki import Pki, make_pki
from chaos.runtime.context import RunContext
from chaos.runtime.undo import Command, KillTree

LOCK = Path("/run/chaos-kube.lock") if os.access("/run", os.W_OK) else Path("/tmp/chaos-kube.lock")
PAUSE_IMAGE = "chaos-kube-pause:3.4"
"""The pod sandbox image, imported from the build's static pause binary (no registry)."""
SERVICE_RANGE = "10.96.0.0/12"
HOST_KUBELET_DIR = Path("/var/lib/kubelet")
LOCK_WAIT_S = 900.0
"""How long a run waits for another run's cluster on this host to go (tests under pytest -n queue here)."""
NODE_GRACE_S = 20
"""The controller manager's node-monitor-grace-period for a run with a node-notready fault: how long a node may go
without posting its status before it is NotReady (the kubelet posts every 2 s; Kubernetes' default is 40 s)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kubelet: int
    kubelet_healthz: int

    @staticmethod
    def pick() -> "Ports":
        """Five distinct free ports: each socket is held until all are bound (a closed one can be handed out again)."""
        socks = [socket.socket() for _ in range(5)]
        try:
            for s in socks:
                s.bind(("127.0.0.1", 0))
            return Ports(*(s.getsockname()[1] for s in socks))
        finally:
            for s in socks:
                s.close()


def pause_image_tar(pause: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(pause), arcname="pause")
    return buf.getvalue()


def api_errors() -> tuple[type[BaseException], ...]:
    """What a call to the cluster raises when the cluster, not the harness, failed: the API's error answers, a
    refused or broken connection, a timeout. Never a bare ``Exception``: the harness interrupts its own loop with
    an exception (Ctrl-C, SIGTERM), which a catch-all around an API call would swallow."""
    import urllib3
    import websocket  # the client's exec transport (a dependency of the kubernetes client)
    from kubernetes.client.exceptions import ApiException

    return (ApiException, urllib3.exceptions.HTTPError, websocket.WebSocketException, OSError)


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


class KubeCluster:
    """Brings up and (through the ledger) tears down one run's cluster; ``api`` is the official client on it."""

    def __init__(self, run: RunContext, root: Path, namespace: str, node_grace_s: int | None = None,
                 node_count: int = 1) -> None:
        self.run = run
        self.node_count = node_count
        """Kubernetes nodes: the first on the host's docker daemon, each further one with a daemon of its own."""
        self.extra: list[ExtraNode] = []
        self.node_grace_s = node_grace_s
        """The node controller's grace period for a node that stopped posting its status (None: Kubernetes' 40 s)."""
        self.root = root
        self.namespace = namespace
        self.node = os.uname().nodename
        self.ports = Ports.pick()
        self.bin: Path | None = None
        self.pki: Pki | None = None
        self.kubeconfig = root / "kubeconfig"
        self.logs = root / "logs"
        # Outside the run directory: the kubelet's unix sockets under its root must fit in 107 bytes.
        short = hashlib.sha1(namespace.encode()).hexdigest()[:10]
        base = Path("/run") if os.access("/run", os.W_OK) else Path("/tmp")
        self.kubelet_root = base / f"chaos-kube-{short}"
        self.pids: dict[str, int] = {}
        self._lock: Any = None
        self._api: Any = None
        self._procs: list[subprocess.Popen] = []

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    # ------------------------------------------------------------------ commands
    def argv(self, what: str) -> list[str]:
        b, p, r, k = self.bin, self.ports, self.root, self.pki
        assert b is not None and k is not None
        if what == "etcd":
            peer = f"http://127.0.0.1:{p.etcd_peer}"
            return [str(b / "etcd"), "--name=chaos", f"--data-dir={r / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{p.etcd_client}",
                    f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client}", f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=chaos={peer}"]
        if what == "kube-apiserver":
            return [str(b / what), f"--etcd-servers=http://127.0.0.1:{p.etcd_client}", "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1", f"--secure-port={p.apiserver}", "--insecure-port=0",
                    f"--tls-cert-file={k.server_cert}", f"--tls-private-key-file={k.server_key}",
                    f"--client-ca-file={k.ca}", f"--token-auth-file={k.tokens}",
                    f"--service-account-key-file={k.sa_pub}", f"--service-account-signing-key-file={k.sa_key}",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    f"--service-cluster-ip-range={SERVICE_RANGE}", "--authorization-mode=Node,RBAC",
                    # A loopback endpoint for the kubernetes service is invalid: no reconciler.
                    "--endpoint-reconciler-type=none", "--kubelet-preferred-address-types=InternalIP"]
        if what == "kube-controller-manager":
            return [str(b / what), f"--kubeconfig={self.kubeconfig}", "--bind-address=127.0.0.1", "--port=0",
                    "--secure-port=0", "--leader-elect=false", f"--service-account-private-key-file={k.sa_key}",
                    f"--root-ca-file={k.ca}", "--controllers=*,-nodeipam,-service,-route,-cloud-node-lifecycle"] + (
                    # A run with a node-notready fault sees its node NotReady in 20 s, not 40. Only that run: a
                    # kubelet starved that long on a loaded host would taint the node and hold other runs' pods.
                    [f"--node-monitor-grace-period={self.node_grace_s}s", "--node-monitor-period=2s"]
                    if self.node_grace_s else [])
        if what == "kube-scheduler":
            return [str(b / what), f"--kubeconfig={self.kubeconfig}", "--bind-address=127.0.0.1", "--port=0",
                    "--secure-port=0", "--leader-elect=false"]
        if what == "kubelet":
            return self.kubelet_argv(self.node, p.kubelet, p.kubelet_healthz, self.kubelet_root)
        extra = next((n for n in self.extra if what == f"kubelet-{n.index}"), None)
        if extra is not None:
            return self.kubelet_argv(extra.name, extra.kubelet_port, extra.healthz_port, extra.home,
                                     extra.kubelet_extra())
        raise ValueError(what)

    def kubelet_argv(self, node: str, port: int, healthz: int, home: Path, extra: tuple[str, ...] = ()) -> list[str]:
        assert self.bin is not None
        shim = f"unix://{home / 'dockershim.sock'}"  # not /var/run/dockershim.sock and /var/lib/dockershim: the host's
        return [str(self.bin / "kubelet"), f"--kubeconfig={self.kubeconfig}", "--container-runtime=docker",
                f"--pod-infra-container-image={PAUSE_IMAGE}", "--cgroup-driver=cgroupfs", "--fail-swap-on=false",
                f"--hostname-override={node}", "--node-ip=127.0.0.1", "--address=127.0.0.1",
                "--healthz-bind-address=127.0.0.1", f"--healthz-port={healthz}", f"--port={port}",
                "--read-only-port=0",
                # The host's own network rules, NAT and images are not the cluster's to manage.
                "--make-iptables-util-chains=false", "--hairpin-mode=none", "--image-gc-high-threshold=100",
                "--image-gc-low-threshold=99", "--eviction-hard=memory.available<100Mi", "--cluster-dns=",
                "--oom-score-adj=0", f"--root-dir={home / 'root'}", f"--cert-dir={home / 'pki'}",
                "--sync-frequency=5s", "--node-status-update-frequency=2s", f"--container-runtime-endpoint={shim}",
                f"--image-service-endpoint={shim}", f"--experimental-dockershim-root-directory={home / 'dockershim'}",
                *extra]

    @property
    def node_names(self) -> list[str]:
        return [self.node] + [n.name for n in self.extra]

    def kubelet_pid(self, node: str) -> int | None:
        """The pid of Kubernetes node ``node``'s kubelet (None: not one of this cluster's)."""
        if node == self.node:
            return self.pids.get("kubelet")
        return next((self.pids.get(f"kubelet-{n.index}") for n in self.extra if n.name == node), None)

    def docker(self, node: str | None = None) -> Any:
        """A docker SDK client on the daemon that runs Kubernetes node ``node``'s pods (the host's: the first)."""
        import docker

        extra = next((n for n in self.extra if n.name == node), None)
        return extra.docker() if extra is not None else docker.from_env()

    def plan(self) -> list[str]:
        more = [f"kube: {self.node_count - 1} further node(s), each a kubelet with a docker daemon of its own "
                f"(no bridge, iptables or NAT)"] if self.node_count > 1 and not self.extra else describe(self.extra)
        return [f"kube: wait for the host's lock {LOCK}; keys and kubeconfig in {self.root}"] + [
            f"kube: {d}: {shlex.join(self.argv(d))}" if self.pki else f"kube: start {d}"
            for d in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")] + more

    # ------------------------------------------------------------------ lifecycle
    def _take_lock(self, wait_s: float) -> None:
        fh = open(LOCK, "a+")
        deadline = time.monotonic() + wait_s
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    fh.close()
                    raise HarnessError(f"another run's Kubernetes cluster held {LOCK} for {wait_s:g} s (one local "
                                       f"cluster runs on a host at a time; a run killed before its cleanup keeps it "
                                       f"held until `chaos cleanup`)") from None
                time.sleep(0.5)
        self._lock = fh
        if time.monotonic() - t0 > 1:
            self.run.log("kube_lock", waited_s=round(time.monotonic() - t0, 3))

    def release_lock(self, wait_s: float = 15.0) -> None:
        """Let the next run have the host, once this cluster's daemons have exited (and are reaped): a dying
        kubelet must not be taken for a foreign one, nor remove the next cluster's pods."""
        deadline = time.monotonic() + wait_s
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.run.log("kube_daemon", what=os.path.basename(str(proc.args[0])), pid=proc.pid,
                             still_running_after_s=wait_s)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _push_teardown(self) -> None:
        """What the kubelet leaves behind, undone after every daemon is dead (the ledger runs in reverse)."""
        ns, root = self.namespace, str(self.kubelet_root)
        push = self.run.ledger.push
        push("target", Command(["rm", "-rf", "--one-file-system", root], only_if=["test", "-d", root]))
        if not HOST_KUBELET_DIR.exists():
            # Kubernetes 1.20's device manager keeps its socket, checkpoint and a DEPRECATION note in device-plugins/
            # here, whatever the kubelet's root. The run made the folders: they go, with those files and no more.
            plugins = HOST_KUBELET_DIR / "device-plugins"
            files = " ".join(str(plugins / f) for f in ("kubelet.sock", "kubelet_internal_checkpoint", "DEPRECATION"))
            push("target", Command(sh(f"rm -f {files}; rmdir {plugins} {HOST_KUBELET_DIR} 2>/dev/null; true"),
                                   only_if=["test", "-d", str(plugins)]))
        # The log folders themselves go too when the run's pods were all they held (the kubelet made them).
        push("target", Command(sh(f"rm -rf /var/log/pods/{ns}_* /var/log/containers/*_{ns}_*; "
                                  f"rmdir /var/log/pods /var/log/containers 2>/dev/null; true"),
                               only_if=sh(f"ls -d /var/log/pods/{ns}_* >/dev/null 2>&1")))
        # Pod cgroups (cgroupfs driver): empty ones only.
        push("target", remove_empty_cgroups("kubepods"))
        # The kubelet bind-mounts its root rshared and mounts each pod's volumes under it.
        push("target", Command(sh(f"findmnt -rno TARGET | grep -F {shlex.quote(root)} | sort -r | "
                                  f"xargs -r -n1 umount -l"),
                               only_if=sh(f"findmnt -rno TARGET | grep -qF {shlex.quote(root)}")))
        label = f"label=io.kubernetes.pod.namespace={ns}"
        push("target", Command(sh(f"docker ps -aq --filter {label} | xargs -r docker rm -f >/dev/null"),
                               only_if=sh(f"docker ps -aq --filter {label} | grep -q .")))

    def _spawn(self, what: str, argv: list[str] | None = None) -> subprocess.Popen:
        argv = argv or self.argv(what)
        with open(self.logs / f"{what}.log", "ab") as out:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAOS_", "KUBECONFIG"))}
            # Each daemon holds the host's lock too: a harness killed before its cleanup leaves them running, and
            # the next run must wait for `chaos cleanup` (or their end), not start a second kubelet beside them.
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=str(self.root), start_new_session=True,
                                    pass_fds=(self._lock.fileno(),) if self._lock is not None else ())
        self.run.ledger.push("target", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        self.pids[what] = proc.pid
        self._procs.append(proc)
        self.run.log("kube_daemon", what=what, pid=proc.pid, argv=argv)
        return proc

    def start(self, timeout_s: float = 120.0, lock_wait_s: float = LOCK_WAIT_S) -> None:
        why = refusal()
        if why:
            raise CapabilityError(why)
        self.bin = built()
        self._take_lock(lock_wait_s)
        other = foreign_kubelet()
        if other is not None:
            self.release_lock()
            raise CapabilityError(f"a kubelet the harness did not start runs on this host (pid {other.pid}): a second "
                                  f"one on the same docker daemon would remove its pods; stop it, or use cluster: "
                                  f"existing against its cluster")
        self.ports = Ports.pick()  # now, not at construction: another run may have taken those while this one waited
        t0 = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        self._push_teardown()
        self.pki = make_pki(self.root / "pki", self.node)
        self.pki.kubeconfig(self.server, self.kubeconfig, namespace=self.namespace)
        self._pause_image()
        self.extra = plan_extra(self, self.node_count, Ports.pick)
        dockerds = [start_docker(self, n) for n in self.extra]  # they start while the control plane does
        procs = [self._spawn("etcd"), self._spawn("kube-apiserver")]
        self._wait(self._api_ready, timeout_s, "the API server did not answer", procs)
        t_api = time.monotonic() - t0
        procs += [self._spawn("kube-controller-manager"), self._spawn("kube-scheduler"), self._spawn("kubelet")]
        assert self.bin is not None
        for node, dockerd in zip(self.extra, dockerds):
            ready_docker(self, node, dockerd, pause_image_tar(self.bin / "pause"), PAUSE_IMAGE)
            procs += [dockerd, self._spawn(f"kubelet-{node.index}")]
        self._wait(self._node_ready, timeout_s, f"node(s) {', '.join(self.node_names)} did not become Ready", procs)
        for name in self.node_names:
            self._address_node(name)
        self._create_namespace()
        self._wait(self._default_account, 30, f"namespace {self.namespace} got no default service account", procs)
        self.run.log("kube_cluster_up", seconds=round(time.monotonic() - t0, 3), api_s=round(t_api, 3),
                     server=self.server, node=self.node, nodes=self.node_names, namespace=self.namespace,
                     kubeconfig=str(self.kubeconfig))

    def _pause_image(self) -> None:
        import docker

        assert self.bin is not None
        client = docker.from_env()
        try:
            if client.images.list(name=PAUSE_IMAGE):
                return
            repo, tag = PAUSE_IMAGE.split(":")
            client.api.import_image_from_data(pause_image_tar(self.bin / "pause"), repository=repo, tag=tag,
                                              changes=['ENTRYPOINT ["/pause"]'])
            self.run.log("docker_image", image=PAUSE_IMAGE, built_from=str(self.bin / "pause"))
        finally:
            client.close()

    # ------------------------------------------------------------------ the API
    context = None
    """The kubeconfig's own current context (an existing cluster's may name another)."""

    @property
    def up(self) -> bool:
        """Whether start() got as far as the keys: before that there is no API to ask."""
        return self.pki is not None

    @property
    def api(self) -> Any:
        """An ``kubernetes.client.ApiClient`` on the cluster (the kubernetes extra)."""
        if self._api is None:
            from kubernetes import config

            self._api = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def _api_ready(self) -> bool:
        try:
            self.core().list_namespace(_request_timeout=2)
            return True
        except api_errors():  # connection refused, 503 while it starts
            return False

    def _node_ready(self) -> bool:
        try:
            nodes = self.core().list_node(_request_timeout=2).items
        except api_errors():
            return False
        ready = {n.metadata.name for n in nodes
                 if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))}
        return set(self.node_names) <= ready

    def _address_node(self, node: str) -> None:
        """Give the node its loopback address. The kubelet refuses a loopback --node-ip (validateNodeIP) and so
        publishes no address at all: the API server could not reach it for an exec or a log, and hostNetwork pods
        would have no IP. The kubelet's own status updates keep addresses they did not set."""
        self.core().patch_node_status(node, {"status": {"addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node}]}})

    def _create_namespace(self) -> None:
        from kubernetes import client

        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace, labels={"chaos/run": "1"}))
        self.core().create_namespace(body)

    def _default_account(self) -> bool:
        try:
            return any(a.metadata.name == "default"
                       for a in self.core().list_namespaced_service_account(self.namespace).items)
        except api_errors():
            return False

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str, procs: list[subprocess.Popen]) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.25)
        dead = "; ".join(f"{os.path.basename(str(p.args[0]))} exited {p.returncode}" for p in procs
                         if p.poll() is not None)
        # Not a missing capability (the host was checked before): a cluster that did not come up is an error.
        raise HarnessError(f"{what} within {timeout_s:g} s{': ' + dead if dead else ''}. Logs: {self.logs}")
