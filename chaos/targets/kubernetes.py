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

import importlib.util
import json
import shlex
import signal as _signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from chaos.errors import CapabilityError, FaultError, HarnessError
from chaos.kube.build import refusal
from chaos.kube.ctl import WAIT_PODS_S
from chaos.kube.existing import EXISTING_FAULTS, RUN, ExistingCluster, Permission
from chaos.kube.jobs import job_code, job_state
from chaos.kube.minicluster import api_errors
from chaos.kube.template import AGENT, agent_container, host_template, load_template, pod_template
from chaos.runtime.context import RunContext
from chaos.runtime.hostimage import ensure_host_image
from chaos.runtime.launch import Rendezvous, protocol_env, workload_argv, workload_env
from chaos.runtime.network import run_names
from chaos.runtime.node import Node
from chaos.runtime.processes import Worker
from chaos.runtime.undo import Command
from chaos.spec.workload import resolve_path
from chaos.targets.base import ClusterModes, Target, require_shared_dir
from chaos.targets.kubernetes_config import KubernetesConfig

__all__ = ["Kubernetes", "KubernetesConfig", "job_code"]

POLL_S = 0.25
"""How often the Jobs and pods are read: a pod's new container is a root of the run's tree within this."""
STEPS = "chaos.slurm.steps"
"""The module that lists and signals a node's ranks where it runs (Slurm's srun steps run it too)."""


class KubeNode(Node):
    """A node whose state is its Job's: ``poll`` is None while the Job runs, then 0 (complete) or 1 (failed)."""

    code: int | None = None

    def poll(self) -> int | None:
        return self.code


class Kubernetes(ClusterModes, Target, kind="kubernetes"):
    """Each node a batch/v1 Job of one pod running torchrun, on a throwaway local Kubernetes (root, docker and the
    build of scripts/kube-build.sh) or on your cluster through its kubeconfig (cluster: existing)."""

    Config = KubernetesConfig
    config: KubernetesConfig

    def __init__(self, config: KubernetesConfig) -> None:
        super().__init__(config)
        self.cluster: Any = None
        self.template: dict[str, Any] = {}
        self.image_ref = ""
        self.port = config.rdzv_port
        self._read_at = 0.0
        self._containers: set[str] = set()
        self._jobs: dict[str, Any] = {}
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

    def selector(self, run: RunContext) -> str:
        return f"chaos/run={self.prefix(run)}"

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
        return workload_argv(run, rdzv, python=c.python)

    def prepare(self, run: RunContext) -> None:
        self.run = run
        (run.run_dir / "kube").mkdir(exist_ok=True)
        if not self.local:
            return
        import docker

        from chaos.kube.minicluster import KubeCluster, free_port, port_free

        self.cluster = KubeCluster(run, run.run_dir.resolve() / "kube", namespace=self.prefix(run))
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
        # A user's pod gets what the protocol and the experiment set, not this host's whole environment.
        return workload_env(run, node) if self.local else protocol_env(run, node)

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

    def agent_pidfile(self, run: RunContext, node: str) -> Path:
        return run.run_dir.resolve() / "kube" / f"agent-{node}.pid"

    def launch(self, run: RunContext) -> list[Node]:
        from kubernetes import client

        c = self.config
        batch = client.BatchV1Api(self.cluster.api)
        if not self.local:  # before the first Job exists: a SIGKILLed harness's cleanup deletes them too
            ctl = [sys.executable, "-m", "chaos.kube.ctl"]
            where = [str(self.cluster.kubeconfig), self.cluster.namespace, self.selector(run)]
            ctx = ["--context", c.context] if c.context else []
            run.ledger.push("target", Command(ctl + ["delete-jobs", *where, *ctx],
                                              only_if=ctl + ["jobs-left", *where, *ctx], timeout_s=WAIT_PODS_S + 30))
        self.nodes = []
        for k in range(c.nodes):
            name = self.job_name(run, k)
            node = KubeNode(name=f"node{k}", rank=k, address=c.rdzv_host or "127.0.0.1", info={"job": name})
            labels = {"chaos/run": self.prefix(run), "chaos/node": node.name}
            env = self._env(run, node.name)
            pod = pod_template(self.template, labels=labels, command=["/bin/sh", "-c",
                               self._start(run, node.name, self._argv(run, k))], env=env,
                               restart_policy=c.restart_policy, grace_s=c.grace_s)
            if not self.local:
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
    def pods(self) -> list[Any]:
        """The run's pods (its label), newest last."""
        assert self.run is not None
        items = self.cluster.core().list_namespaced_pod(self.cluster.namespace, label_selector=self.selector(self.run),
                                                        _request_timeout=5).items
        return sorted(items, key=lambda p: p.metadata.creation_timestamp)

    def pod_of(self, node: str) -> Any:
        """The live pod of ``node`` (node0, node1, ...): the newest one not being deleted."""
        live = [p for p in self.pods() if (p.metadata.labels or {}).get("chaos/node") == node
                and p.metadata.deletion_timestamp is None]
        if not live:
            raise FaultError(f"no live pod of {node} in namespace {self.cluster.namespace}")
        return live[-1]

    @staticmethod
    def agent_status(pod: Any) -> Any:
        """The running agent container's status in ``pod`` (None: not running)."""
        statuses = pod.status.container_statuses or []
        named = [s for s in statuses if s.name == AGENT] or statuses[:1]
        return next((s for s in named if s.state.running is not None and s.container_id), None)

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
            pods = self.pods()
        except api_errors() as exc:  # the API server under load: read again at the next poll
            run.log("kube_read_error", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        self._jobs = {j.metadata.name: j for j in jobs}
        for node in self.nodes:
            job = self._jobs.get(node.info["job"])
            if job is not None and isinstance(node, KubeNode):
                node.code = job_code(job.status)
                state = job_state(job.status)
                if state != node.info.get("state"):  # the Job's own account: failures against its backoffLimit
                    node.info["state"] = state
                    run.log("kube_job", node=node.name, job=node.info["job"], **state)
        fresh = [(pod, status) for pod in pods if (status := self.agent_status(pod)) is not None
                 and self.container_id(status) not in self._containers]
        if not fresh:
            return
        docker_client = importlib.import_module("docker").from_env() if self.local else None
        try:
            for pod, status in fresh:
                cid = self.container_id(status)
                node = (pod.metadata.labels or {}).get("chaos/node", "?")
                pid = None
                if docker_client is not None:  # the host's PID namespace: the container's processes are the run's
                    pid = self._container_pid(docker_client, cid)
                    if pid <= 0:
                        continue
                    run.tree.add_root(node, pid)
                self._containers.add(cid)
                run.log("kube_container", node=node, pod=pod.metadata.name, container=cid[:12], pid=pid,
                        restart_count=status.restart_count, pod_uid=pod.metadata.uid, k8s_node=pod.spec.node_name)
        finally:
            if docker_client is not None:
                docker_client.close()

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

    # ------------------------------------------------------------------ the ranks, through the API (existing)
    def _exec(self, pod: Any, argv: list[str], what: str) -> str:
        status = self.agent_status(pod)
        name = status.name if status is not None else AGENT
        code, out, err = self.cluster.exec(pod.metadata.name, name, argv)
        if code != 0:
            raise FaultError(f"{what} in pod {pod.metadata.name} failed (exit {code}): {(err or out).strip()[:300]}")
        return out

    def workers(self, run: RunContext) -> list[Worker]:
        """Live workers of the run: the process tree on the local cluster; on yours, a listing exec in every pod."""
        if self.local:
            return run.tree.workers()
        out: list[tuple[str, Worker]] = []
        for pod in self.pods():
            node = (pod.metadata.labels or {}).get("chaos/node", "?")
            if pod.metadata.deletion_timestamp is not None or self.agent_status(pod) is None:
                continue
            try:
                answer = self._exec(pod, [self.config.python, "-m", STEPS, "list", str(run.run_dir.resolve())],
                                    "listing the ranks")
            except FaultError as exc:  # a pod that went between the listing and the exec
                run.log("kube_read_error", error=str(exc)[:300])
                continue
            for line in answer.splitlines():
                try:
                    w = json.loads(line)
                except ValueError:
                    continue
                if w.get("chaos_host") != node:  # a pod in its host's PID namespace sees every pod's ranks there
                    continue
                out.append((str(w.get("store")), Worker(
                    pid=w["pid"], create_time=w["create_time"], rank=w["rank"], local_rank=w["local_rank"],
                    restart_count=w["restart_count"], node=node, launch=w["launch"])))
        # A round: the workers of one rendezvous, sharing its store (new for every round here); newest last.
        newest = {store: max(w.create_time for s, w in out if s == store) for store, _ in out}
        order = {store: n for n, store in enumerate(sorted(newest, key=newest.__getitem__), start=1)}
        return [replace(w, generation=order[store]) for store, w in out]

    def _step_argv(self, run: RunContext, sig: str, workers: list[Worker]) -> list[str]:
        return [self.config.python, "-m", STEPS, "signal", str(run.run_dir.resolve()), sig,
                *(f"{w.pid}:{w.create_time!r}" for w in workers)]

    def signal(self, run: RunContext, workers: list[Worker], sig: _signal.Signals) -> list[int]:
        """Signal ``workers`` by an exec in each one's pod; each is re-checked there to be the same process first."""
        hit: list[int] = []
        for node in sorted({w.node for w in workers}):
            pod = self.pod_of(node)
            out = self._exec(pod, self._step_argv(run, sig.name, [w for w in workers if w.node == node]),
                             f"signalling ranks with {sig.name}")
            try:
                hit += json.loads(out.strip().splitlines()[-1])["hit"]
            except (ValueError, IndexError, KeyError, TypeError):
                raise FaultError(f"signalling ranks in pod {pod.metadata.name}: no answer ({out.strip()[:200]})") \
                    from None
        return hit

    def signal_undo(self, run: RunContext, worker: Worker, signame: str) -> Command:
        """A ledger entry that sends ``signame`` to ``worker`` later (a SIGCONT after a SIGSTOP), while its pod runs."""
        pod = self.pod_of(worker.node)
        status = self.agent_status(pod)
        ctl = [sys.executable, "-m", "chaos.kube.ctl"]
        ctx = ["--context", self.config.context] if self.config.context else []
        where = [str(self.cluster.kubeconfig), self.cluster.namespace, pod.metadata.name]
        return Command(ctl + ["exec", *where, status.name if status else AGENT, *ctx, "--",
                              *self._step_argv(run, signame, [worker])],
                       only_if=ctl + ["running", *where, *ctx])

    def kill_agent(self, run: RunContext, pod: Any, sig: str) -> None:
        """Signal the node's torchrun agent from inside its container (the container then ends with its status)."""
        pid = shlex.quote(str(self.agent_pidfile(run, pod.metadata.labels["chaos/node"])))
        self._exec(pod, ["/bin/sh", "-c", f"kill -s {sig.removeprefix('SIG')} \"$(cat {pid})\""],
                   f"killing the agent with {sig}")

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
                                                                  grace_period_seconds=0, _request_timeout=10)
            except api_errors() as exc:
                run.log("kube_read_error", error=f"deleting the Jobs: {type(exc).__name__}: {exc}"[:300])
        super().stop(run)

    def teardown(self, run: RunContext) -> list[Any]:
        try:
            return super().teardown(run)
        finally:
            if self.local and self.cluster is not None:
                self.cluster.release_lock()
