"""Target ``kubernetes``: the job as one batch/v1 Job per node, each pod a torchrun agent, on a real cluster.

Each node of the job is a Job of one pod (``<run>-n<k>``; Kubernetes 1.20 has no Indexed Jobs, so a pod learns its
node rank from its own Job, as training operators did before them). The Job's own recovery is what is judged: a
deleted pod recreated by the Job controller (``restart_policy: Never``), a container restarted in place by the
kubelet (``OnFailure``), the Job given up after ``backoff_limit`` failures.

``cluster: local`` brings up a throwaway single-node Kubernetes for the run (chaos/kube/minicluster.py); its pods run
the host's own Python and torch (the host-userland image, hostPath volumes) on the host's network (the rendezvous is
127.0.0.1) and in the host's PID namespace, so the harness sees each container's processes as it sees a local
run's: rank faults, worker records and the attempt rule work unchanged. ``cluster: existing`` runs on the user's
cluster through its kubeconfig, in the user's own pod (chaos/kube/template.py): the harness creates only the run's
Jobs, asks for every permission first, and reaches the ranks through the API (exec), never through a host.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shlex
import socket
import time
from typing import Any

from chaos.errors import CapabilityError, FaultError, HarnessError
from chaos.kube.build import refusal
from chaos.kube.ctl import WAIT_PODS_S, command
from chaos.kube.existing import EXISTING_FAULTS, RUN, ExistingCluster, Permission
from chaos.kube.jobs import job_code, job_state
from chaos.kube.minicluster import api_errors
from chaos.kube.ranks import RanksByExec
from chaos.kube.starting import StartWatch, failed_create, hold
from chaos.kube.template import AGENT, agent_container, host_template, load_template, pod_template, prefer
from chaos.runtime.context import RunContext
from chaos.runtime.hostimage import ensure_host_image
from chaos.runtime.launch import Rendezvous, protocol_env, workload_argv, workload_cwd, workload_env
from chaos.runtime.network import run_names
from chaos.runtime.node import Node
from chaos.runtime.undo import Command
from chaos.spec.workload import resolve_path
from chaos.targets.base import ClusterModes, Target, require_shared_dir
from chaos.targets.kubernetes_config import KubernetesConfig

__all__ = ["Kubernetes", "KubernetesConfig", "job_code"]

POLL_S = 0.25
"""How often the Jobs and pods are read: a pod's new container is a root of the run's tree within this."""


class KubeNode(Node):
    """A node whose state is its Job's: ``poll`` is None while the Job runs, then 0 (complete) or 1 (failed)."""

    code: int | None = None

    def poll(self) -> int | None:
        return self.code


class Kubernetes(ClusterModes, RanksByExec, Target, kind="kubernetes"):
    """Each node a batch/v1 Job of one pod running torchrun, on a throwaway local Kubernetes (root, docker and the
    build of scripts/kube-build.sh) or on your cluster through its kubeconfig (cluster: existing)."""

    Config = KubernetesConfig
    config: KubernetesConfig

    def __init__(self, config: KubernetesConfig) -> None:
        super().__init__(config)
        self.cluster: Any = None
        self.template: dict[str, Any] = {}
        self.agent_name = AGENT
        self.image_ref = ""
        self.port = config.rdzv_port
        self._read_at = 0.0
        self._containers: set[str] = set()
        self.starts = StartWatch(config.start_timeout_s)
        self.run: RunContext | None = None

    @property
    def node_count(self) -> int:
        return self.config.nodes

    def check(self, run: RunContext) -> None:
        super().check(run)
        if self.local:
            why = refusal()
            if why:
                raise CapabilityError(f"target kubernetes (cluster: local): {why}")
            import docker

            try:
                docker.from_env().close()  # from_env asks the daemon its API version
            except docker.errors.DockerException as exc:
                raise CapabilityError(f"target kubernetes (cluster: local): its kubelet runs the pods in docker, and "
                                      f"no docker daemon answers ({exc}); start one (scripts/setup.sh does)") from None
        if importlib.util.find_spec("kubernetes") is None:
            raise CapabilityError("target kubernetes needs the official Python client: pip install -e '.[kube]'")
        if self.local:
            return
        c = self.config
        require_shared_dir(run, c.shared_dir, "pods")
        path = resolve_path(str(c.pod_template), run.experiment.source)
        if path is None:
            raise CapabilityError(f"target.pod_template: {c.pod_template} not found (relative to the experiment "
                                  f"file's folder or the working directory)")
        self.template = load_template(path)
        self.cluster = ExistingCluster(c.kubeconfig, c.context, str(c.namespace))
        self.cluster.connect()
        self.cluster.require(RUN, "target kubernetes (cluster: existing)")

    def admit(self, run: RunContext, kind: str, config: Any) -> None:
        duration = getattr(config, "duration_s", None)
        if kind in ("node-drain", "node-notready") and duration and duration >= self.config.start_timeout_s:
            # Its evicted pods wait Pending (unschedulable) while it lasts: that hold would end the run.
            raise CapabilityError(f"fault {kind} keeps its node from taking pods for {duration:g} s, as long as or "
                                  f"longer than target.start_timeout_s {self.config.start_timeout_s:g} s (a pod held "
                                  f"from starting that long ends the run): raise start_timeout_s above the fault")
        if self.local:
            return
        needs = EXISTING_FAULTS.get(kind)
        if needs is None:
            raise CapabilityError(f"fault {kind} on an existing cluster: the harness reaches your pods through the "
                                  f"Kubernetes API only, and {kind} acts on this host's processes, kernel or "
                                  f"filesystems; faults there: {', '.join(EXISTING_FAULTS)} (cluster: local runs "
                                  f"every fault)")
        self.cluster.require(needs, f"fault {kind}")

    def prefix(self, run: RunContext) -> str:
        return f"chaos-{run_names(run).rid}"

    def run_uid(self, run: RunContext) -> str:
        """The run's identity on the cluster, whole: this host and the run directory (one run's own, on a shared
        volume too). The short ``chaos/run`` of the Jobs' names may be another run's in the same namespace (6 hex
        digits); the deletion that selects by this as well never takes another run's Jobs."""
        return hashlib.sha256(f"{socket.gethostname()}:{run.run_dir.resolve()}".encode()).hexdigest()[:40]

    def selector(self, run: RunContext) -> str:
        return f"chaos/run={self.prefix(run)},chaos/run-uid={self.run_uid(run)}"

    def job_name(self, run: RunContext, k: int) -> str:
        return f"{self.prefix(run)}-n{k}"

    def plan(self, run: RunContext) -> list[str]:
        if self.local:
            lines = [f"kube: a local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, "
                     f"kubelet on docker), namespace {self.prefix(run)}"]
        else:
            lines = [f"kube: your cluster ({self.config.kubeconfig or 'the default kubeconfig'}"
                     f"{', context ' + self.config.context if self.config.context else ''}), namespace "
                     f"{self.config.namespace}, pod {self.config.pod_template}; Jobs labelled {self.selector(run)}"]
        for k in range(self.config.nodes):
            argv = self._argv(run, k)
            lines.append(f"kube: Job {self.job_name(run, k)} (restartPolicy {self.config.restart_policy}, "
                         f"backoffLimit {self.config.backoff_limit}): {shlex.join(argv)}")
        return lines

    def _argv(self, run: RunContext, k: int) -> list[str]:
        c = self.config
        if self.local:  # every pod is on the host's network: torch's guess of who serves the store holds for all
            rdzv = Rendezvous(standalone=False, host="127.0.0.1", port=self.port, nnodes=str(c.nodes), node_rank=k,
                              run_id=self.prefix(run), local_addr="127.0.0.1",
                              rdzv_conf={"is_host": "true" if k == 0 else "false"})
            return workload_argv(run, rdzv)
        # Each pod advertises its own address: the pod's command sets PET_LOCAL_ADDR (torchrun's --local-addr) to
        # the downward API's status.podIP where the cluster gives one.
        rdzv = Rendezvous(standalone=False, host=str(c.rdzv_host), port=c.rdzv_port, nnodes=str(c.nodes),
                          node_rank=k, run_id=self.prefix(run), local_addr=None,
                          rdzv_conf={"is_host": "true" if k == 0 else "false"})
        return workload_argv(run, rdzv, python=c.python, resolve=False)  # a command names the image's programs

    def prepare(self, run: RunContext) -> None:
        self.run = run
        (run.run_dir / "kube").mkdir(exist_ok=True)
        if not self.local:
            return
        import docker

        from chaos.kube.minicluster import NODE_GRACE_S, KubeCluster, free_port, port_free

        notready = any(f.kind == "node-notready" for f in run.experiment.faults)
        self.cluster = KubeCluster(run, run.run_dir.resolve() / "kube", namespace=self.prefix(run),
                                   node_grace_s=NODE_GRACE_S if notready else None,
                                   node_count=self.config.cluster_nodes)
        self.cluster.start()
        client = docker.from_env()
        try:
            self.image_ref, new = ensure_host_image(client)
        finally:
            client.close()
        if new:
            run.log("docker_image", image=self.image_ref, built_from="host userland (bind mounts)")
        self.port = self.config.rdzv_port if port_free(self.config.rdzv_port) else free_port()
        if self.port != self.config.rdzv_port:
            run.log("capability", what="rdzv_port", available=False,
                    detail=f"port {self.config.rdzv_port} is in use on 127.0.0.1: the rendezvous takes {self.port}")
        self.template = host_template(run, self.image_ref)

    def _env(self, run: RunContext, node: str) -> dict[str, str]:
        # A user's pod gets what the protocol and the experiment set, not this host's whole environment, nor this
        # host's PYTHONPATH (the image has the package installed; in-step faults, which need it, are not admitted).
        if self.local:
            return workload_env(run, node)
        env = protocol_env(run, node)
        if "PYTHONPATH" not in run.experiment.workload.env:
            env.pop("PYTHONPATH")
        return env

    def _start(self, run: RunContext, node: str, argv: list[str]) -> str:
        """The pod's command. Each container a node starts is a launch of its own (CHAOS_LAUNCH, counted in the run
        directory): a pod recreated after a delete or a drain starts a fresh agent, whose restart count is 0 again,
        so without it the new round would carry the first round's attempt ("0.0") and look like the same one."""
        kube = run.run_dir.resolve() / "kube"
        count = shlex.quote(str(kube / f"launches-{node}"))
        log = shlex.quote(str(run.run_dir.resolve() / "output.log"))
        head = f"n=$(( $(cat {count} 2>/dev/null || echo -1) + 1 )); echo $n > {count}; CHAOS_LAUNCH=$n "
        if self.local:  # the agent is the container's main process: docker kill reaches it
            return f"{head}exec {shlex.join(argv)} >> {log} 2>&1"
        # On a cluster of the user's a kill comes from an exec inside the container, and the kernel drops a SIGKILL
        # sent there to the namespace's first process: that is this shell, which passes SIGTERM on and exits with the
        # agent's status, so a killed agent ends the container as a killed main process would.
        pid = shlex.quote(str(self.agent_pidfile(run, node)))
        head = f'[ -n "$CHAOS_POD_IP" ] && export PET_LOCAL_ADDR="$CHAOS_POD_IP"; {head}'
        return (f"{head}{shlex.join(argv)} >> {log} 2>&1 & a=$!; echo $a > {pid}; "
                f"trap 'kill -TERM $a; t=1' TERM INT; wait $a; rc=$?; "
                f"if [ -n \"$t\" ]; then wait $a; rc=$?; fi; exit $rc")

    def launch(self, run: RunContext) -> list[Node]:
        from kubernetes import client

        c = self.config
        batch = client.BatchV1Api(self.cluster.api)
        if not self.local:  # before the first Job exists: a SIGKILLed harness's cleanup deletes them too
            where = (str(self.cluster.kubeconfig), self.cluster.namespace, self.selector(run))
            run.ledger.push("target", Command(command("delete-jobs", *where, context=c.context),
                                              only_if=command("jobs-left", *where, context=c.context),
                                              timeout_s=WAIT_PODS_S + 30))
        self.agent_name = agent_container(self.template["spec"]["containers"]).get("name") or AGENT
        self.nodes = []
        self.starts = StartWatch(c.start_timeout_s)  # a relaunch's pods are held, or not, from now on
        for k in range(c.nodes):
            name = self.job_name(run, k)
            node = KubeNode(name=f"node{k}", rank=k, address=c.rdzv_host or "127.0.0.1", info={"job": name})
            labels = {"chaos/run": self.prefix(run), "chaos/run-uid": self.run_uid(run), "chaos/node": node.name}
            env = self._env(run, node.name)
            # The kubelet expands $(VAR) in a command and a variable's value, and makes $$ a $: every $ is doubled,
            # so the shell gets the script, and a workload its arguments, as written.
            start = self.as_nodes_see(self._start(run, node.name, self._argv(run, k)))
            pod = pod_template(self.template, labels=labels, command=["/bin/sh", "-c", start.replace("$", "$$")],
                               env={k: self.as_nodes_see(v).replace("$", "$$") for k, v in env.items()},
                               restart_policy=c.restart_policy, grace_s=c.grace_s,
                               unreachable_toleration_s=c.unreachable_toleration_s)
            if self.local and c.cluster_nodes > 1:
                prefer(pod, self.cluster.node_names[k % c.cluster_nodes])
            if not self.local:
                if workload_cwd(run):  # the experiment's own working directory, as the image has it
                    agent_container(pod["spec"]["containers"])["workingDir"] = self.as_nodes_see(workload_cwd(run))
                agent_container(pod["spec"]["containers"])["env"].insert(0, {
                    "name": "CHAOS_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
                   "spec": {"backoffLimit": c.backoff_limit, "template": pod}}
            try:
                batch.create_namespaced_job(self.cluster.namespace, job)
            except api_errors() as exc:
                raise HarnessError(f"creating Job {name} in namespace {self.cluster.namespace} failed: "
                                   f"{type(exc).__name__}: {str(exc)[:300]}") from None
            agent = agent_container(pod["spec"]["containers"])
            run.log("node_launch", node=node.name, job=name, restart_policy=c.restart_policy,
                    backoff_limit=c.backoff_limit, container=agent["name"], image=agent["image"],
                    env=sorted(e["name"] for e in agent["env"]))
            self.nodes.append(node)
        return self.nodes

    # ------------------------------------------------------------------ what the cluster says
    def pods(self, raw: bool = False) -> list[Any]:
        """The run's pods (its label), newest last; the API's errors as a FaultError (a fault that could not act),
        or as they are (``raw``: the poll, which reads again)."""
        assert self.run is not None
        try:
            items = self.cluster.core().list_namespaced_pod(
                self.cluster.namespace, label_selector=self.selector(self.run), _request_timeout=5).items
        except api_errors() as exc:
            if raw:
                raise
            raise FaultError(f"listing the run's pods failed: {type(exc).__name__}: {str(exc)[:300]}") from None
        return sorted(items, key=lambda p: p.metadata.creation_timestamp)

    def pod_of(self, node: str) -> Any:
        """The live pod of ``node`` (node0, node1, ...): the newest one not being deleted."""
        live = [p for p in self.pods() if (p.metadata.labels or {}).get("chaos/node") == node
                and p.metadata.deletion_timestamp is None]
        if not live:
            raise FaultError(f"no live pod of {node} in namespace {self.cluster.namespace}")
        return live[-1]

    def agent_status(self, pod: Any) -> Any:
        """The running agent container's status in ``pod`` (None: not running), by its name: the kubelet lists a
        pod's containers by name, not in the template's order, so a sidecar may come first."""
        return next((s for s in pod.status.container_statuses or [] if s.name == self.agent_name
                     and s.state.running is not None and s.container_id), None)

    @staticmethod
    def container_id(status: Any) -> str:
        """The id without its runtime's scheme (docker://, containerd://)."""
        return str(status.container_id or "").split("://", 1)[-1]

    def _read(self, run: RunContext) -> None:
        now = time.monotonic()
        if now - self._read_at < POLL_S:
            return
        self._read_at = now
        from kubernetes import client

        try:
            jobs = client.BatchV1Api(self.cluster.api).list_namespaced_job(
                self.cluster.namespace, label_selector=self.selector(run), _request_timeout=5).items
            pods = self.pods(raw=True)
        except api_errors() as exc:  # the API server under load: read again at the next poll
            run.log("kube_read_error", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        by_name = {j.metadata.name: j for j in jobs}
        for node in self.nodes:
            job = by_name.get(node.info["job"])
            if job is not None and isinstance(node, KubeNode):
                node.code = job_code(job.status)
                state = job_state(job.status)
                if state != node.info.get("state"):  # the Job's own account: failures against its backoffLimit
                    node.info["state"] = state
                    run.log("kube_job", node=node.name, job=node.info["job"], **state)
        self._starting(run, pods, now)
        fresh = [(pod, status) for pod in pods if (status := self.agent_status(pod)) is not None
                 and self.container_id(status) not in self._containers]
        if not fresh:
            return
        clients: dict[str, Any] = {}  # a docker client per Kubernetes node (each further node has its own daemon)
        try:
            for pod, status in fresh:
                cid = self.container_id(status)
                node = (pod.metadata.labels or {}).get("chaos/node", "?")
                pid = None
                if self.local:  # the host's PID namespace: the container's processes are the run's
                    where = pod.spec.node_name or ""
                    if where not in clients:
                        try:
                            clients[where] = self.cluster.docker(where)
                        except importlib.import_module("docker").errors.DockerException as exc:
                            run.log("kube_read_error", error=f"node {where}'s docker daemon: {exc}"[:300])
                            continue  # read again at the next poll
                    pid = self._container_pid(clients[where], cid)
                    if pid <= 0:
                        continue
                    run.tree.add_root(node, pid)
                self._containers.add(cid)
                run.log("kube_container", node=node, pod=pod.metadata.name, container=cid[:12], pid=pid,
                        restart_count=status.restart_count, pod_uid=pod.metadata.uid, k8s_node=pod.spec.node_name)
        finally:
            for docker_client in clients.values():
                docker_client.close()

    def _starting(self, run: RunContext, pods: list[Any], now: float) -> None:
        """What holds each running node's newest pod from starting (chaos/kube/starting.py)."""
        newest = {(p.metadata.labels or {}).get("chaos/node"): p for p in pods if p.metadata.deletion_timestamp is None}
        for node in self.nodes:
            if node.poll() is not None:
                continue
            pod, job = newest.get(node.name), node.info["job"]
            if pod is None:
                what, explain = ("NoPod", f"Job {job} has no pod"), (
                    lambda job=job: failed_create(self.cluster.core(), self.cluster.namespace, job, api_errors()))
            else:
                what, explain = (None if self.agent_status(pod) is not None else hold(pod)), None
            self.starts.see(node.name, what, now, run.log, explain)

    def blocked(self, run: RunContext) -> str | None:
        self._read(run)
        return self.starts.blocked

    @staticmethod
    def _container_pid(client: Any, cid: str) -> int:
        import docker

        try:
            return int(client.api.inspect_container(cid)["State"]["Pid"])
        except (docker.errors.DockerException, KeyError, TypeError, ValueError):
            return 0

    def exit_code(self) -> int | None:
        """A Job given up fails the job at once (a JobSet's default failure policy): the other nodes' agents would
        only wait in the rendezvous for a node that is not coming back."""
        if self.run is not None:
            self._read(self.run)
        return 1 if any(n.poll() == 1 for n in self.nodes) else super().exit_code()

    # ------------------------------------------------------------------ the end
    def stop(self, run: RunContext) -> None:
        """Delete the run's Jobs (their pods with them), then whatever of the run's tree is left."""
        from kubernetes import client

        if self.cluster is not None and self.cluster.up:
            try:
                jobs = client.BatchV1Api(self.cluster.api)
                for job in jobs.list_namespaced_job(self.cluster.namespace, label_selector=self.selector(run),
                                                    _request_timeout=10).items:
                    jobs.delete_namespaced_job(job.metadata.name, self.cluster.namespace,
                                               propagation_policy="Background",
                                               grace_period_seconds=0 if self.local else None, _request_timeout=10)
                # The pods would go with their Jobs, once the garbage collector and each kubelet get to them (half a
                # minute on a loaded cluster); where the run may, they go now, as a local run's processes do.
                if not self.local and self.cluster.allowed(Permission("delete", "pods")):
                    for pod in self.pods():
                        self.cluster.core().delete_namespaced_pod(pod.metadata.name, self.cluster.namespace,
                                                                  grace_period_seconds=1, _request_timeout=10)
            except api_errors() as exc:
                run.log("kube_read_error", error=f"deleting the Jobs: {type(exc).__name__}: {exc}"[:300])
        super().stop(run)

    def teardown(self, run: RunContext) -> list[Any]:
        try:
            return super().teardown(run)
        finally:
            if self.local and self.cluster is not None:
                self.cluster.release_lock()
