"""Target ``kubernetes``: the job as one batch/v1 Job per node, each pod a torchrun agent, on a real cluster.

``cluster: local`` brings up a throwaway single-node Kubernetes for the run (chaos/kube/minicluster.py). Each
node of the job is a Job of one pod (``<run>-n<k>``; Kubernetes 1.20 has no Indexed Jobs, so a pod learns its
node rank from its own Job, as training operators did before them) running the host's own Python and torch
(the host-userland image, hostPath volumes), on the host's network (no cluster DNS: the rendezvous is
127.0.0.1, node 0's agent serving it) and in the host's PID namespace, so the harness sees each container's
processes as it sees a local run's: rank faults, worker records and the attempt rule work unchanged. The
Job's own recovery is what is judged: a deleted pod recreated by the Job controller (``restart_policy:
Never``), a container restarted in place by the kubelet (``OnFailure``), the Job given up after
``backoff_limit`` failures. Every pod's container, mount and log goes with the cluster (its teardown).
"""

from __future__ import annotations

import importlib.util
import shlex
import time
from typing import Any, Literal

from pydantic import Field

from chaos.errors import CapabilityError, HarnessError
from chaos.kube.build import refusal
from chaos.kube.minicluster import api_errors
from chaos.runtime.context import RunContext
from chaos.runtime.hostimage import ensure_host_image, host_binds
from chaos.runtime.launch import PACKAGE_ROOT, Rendezvous, workload_argv, workload_cwd, workload_env
from chaos.runtime.network import run_names
from chaos.runtime.node import Node
from chaos.targets.base import Target, TargetConfig

POLL_S = 0.25
"""How often the Jobs and pods are read: a pod's new container is a root of the run's tree within this."""


class KubernetesConfig(TargetConfig):
    cluster: Literal["local"] = "local"
    """local: a throwaway real single-node cluster for the run (root, docker, and the build of
    scripts/kube-build.sh). A user's cluster through a kubeconfig is the next step (docs/kubernetes.md)."""
    nodes: int = Field(default=2, ge=1, le=8)
    """Nodes of the job: one Job (one pod, one torchrun agent) each."""
    restart_policy: Literal["Never", "OnFailure"] = "Never"
    """The pod template's restartPolicy. Never: a failed or deleted pod is replaced by the Job controller with a
    new pod. OnFailure: the kubelet restarts a failed container in place (RESTARTS goes up)."""
    backoff_limit: int = Field(default=4, ge=0, le=100)
    """The Job's backoffLimit: failures (pods, or container restarts under OnFailure) before it gives up."""
    grace_s: int = Field(default=10, ge=0, le=3600)
    """The pods' terminationGracePeriodSeconds: SIGTERM, then SIGKILL this much later (Kubernetes' default: 30)."""
    rdzv_port: int = Field(default=29400, ge=1024, le=65535)
    """The c10d rendezvous port on 127.0.0.1, served by node 0's agent (a free one is taken if this is busy)."""


class KubeNode(Node):
    """A node whose state is its Job's: ``poll`` is None while the Job runs, then 0 (complete) or 1 (failed)."""

    code: int | None = None

    def poll(self) -> int | None:
        return self.code


def job_code(status: Any) -> int | None:
    """A Job's exit code as the run sees it: 0 once it succeeded, 1 once the controller gave it up (its Failed
    condition: backoffLimit used up), None while it runs (a failed pod it will replace included)."""
    if (status.succeeded or 0) >= 1:
        return 0
    if any(c.type == "Failed" and c.status == "True" for c in (status.conditions or [])):
        return 1
    return None


class Kubernetes(Target, kind="kubernetes"):
    """Each node a batch/v1 Job of one pod running torchrun, on a throwaway local Kubernetes (needs root, docker and
    the build of scripts/kube-build.sh)."""

    Config = KubernetesConfig
    config: KubernetesConfig

    def __init__(self, config: KubernetesConfig) -> None:
        super().__init__(config)
        self.cluster: Any = None
        self.image_ref = ""
        self.port = 0
        self._read_at = 0.0
        self._containers: dict[str, int] = {}
        self._jobs: dict[str, Any] = {}
        self.run: RunContext | None = None

    @property
    def node_count(self) -> int:
        return self.config.nodes

    def check(self, run: RunContext) -> None:
        super().check(run)
        why = refusal()
        if why:
            raise CapabilityError(f"target kubernetes (cluster: local): {why}")
        if importlib.util.find_spec("kubernetes") is None:
            raise CapabilityError("target kubernetes needs the official Python client: pip install -e '.[kube]'")

    def prefix(self, run: RunContext) -> str:
        return f"chaos-{run_names(run).rid}"

    def job_name(self, run: RunContext, k: int) -> str:
        return f"{self.prefix(run)}-n{k}"

    def plan(self, run: RunContext) -> list[str]:
        lines = [f"kube: a local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet on "
                 f"docker), namespace {self.prefix(run)}"]
        for k in range(self.config.nodes):
            argv = workload_argv(run, self._rendezvous(run, k, self.config.rdzv_port))
            lines.append(f"kube: Job {self.job_name(run, k)} (restartPolicy {self.config.restart_policy}, "
                         f"backoffLimit {self.config.backoff_limit}): {shlex.join(argv)}")
        return lines

    def _rendezvous(self, run: RunContext, k: int, port: int) -> Rendezvous:
        # Every pod is on the host's network: torch's guess of who serves the store would be true for all.
        return Rendezvous(standalone=False, host="127.0.0.1", port=port, nnodes=str(self.config.nodes), node_rank=k,
                          run_id=self.prefix(run), local_addr="127.0.0.1",
                          rdzv_conf={"is_host": "true" if k == 0 else "false"})

    def prepare(self, run: RunContext) -> None:
        import docker

        from chaos.kube.minicluster import KubeCluster, free_port, port_free

        self.run = run
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

    def _volumes(self, run: RunContext) -> tuple[list[Any], list[Any]]:
        from kubernetes import client

        binds = {src: (b["bind"], b["mode"] == "ro") for src, b in host_binds().items()}
        script = run.experiment.resolve_script()  # None for a workload given as a command
        for path in (str(PACKAGE_ROOT), workload_cwd(run) or "", str(script.parent) if script else ""):
            if path and not any(path == s or path.startswith(s.rstrip("/") + "/") for s in binds):
                binds[path] = (path, True)
        for path in (str(run.run_dir.resolve()), str(run.ckpt_dir.resolve())):
            binds[path] = (path, False)
        volumes, mounts = [], []
        for i, (src, (dst, ro)) in enumerate(sorted(binds.items())):
            volumes.append(client.V1Volume(name=f"v{i}", host_path=client.V1HostPathVolumeSource(path=src)))
            mounts.append(client.V1VolumeMount(name=f"v{i}", mount_path=dst, read_only=ro))
        return volumes, mounts

    def launch(self, run: RunContext) -> list[Node]:
        from kubernetes import client

        volumes, mounts = self._volumes(run)
        batch = client.BatchV1Api(self.cluster.api)
        log = shlex.quote(str(run.run_dir.resolve() / "output.log"))
        self.nodes = []
        for k in range(self.config.nodes):
            name = self.job_name(run, k)
            node = KubeNode(name=f"node{k}", rank=k, address="127.0.0.1", info={"job": name})
            argv = workload_argv(run, self._rendezvous(run, k, self.port))
            env = [client.V1EnvVar(name=key, value=value) for key, value in workload_env(run, node.name).items()]
            labels = {"chaos/run": self.prefix(run), "chaos/node": node.name}
            # Each container the node starts is a launch of its own (CHAOS_LAUNCH, counted in the run directory):
            # a pod recreated after a delete or a drain starts a fresh agent, whose restart count is 0 again, so
            # without it the new round would carry the first round's attempt ("0.0") and look like the same one.
            count = shlex.quote(str(self.cluster.root / f"launches-{node.name}"))
            start = (f"n=$(( $(cat {count} 2>/dev/null || echo -1) + 1 )); echo $n > {count}; "
                     f"CHAOS_LAUNCH=$n exec {shlex.join(argv)} >> {log} 2>&1")
            container = client.V1Container(
                name="agent", image=self.image_ref, image_pull_policy="Never", env=env, volume_mounts=mounts,
                working_dir=workload_cwd(run) or str(run.run_dir.resolve()), command=["/bin/sh", "-c", start])
            spec = client.V1PodSpec(
                containers=[container], volumes=volumes, restart_policy=self.config.restart_policy,
                host_network=True, host_pid=True, automount_service_account_token=False,
                termination_grace_period_seconds=self.config.grace_s)
            job = client.V1Job(
                metadata=client.V1ObjectMeta(name=name, labels=labels),
                spec=client.V1JobSpec(backoff_limit=self.config.backoff_limit, template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels), spec=spec)))
            batch.create_namespaced_job(self.cluster.namespace, job)
            run.log("node_launch", node=node.name, job=name, restart_policy=self.config.restart_policy,
                    backoff_limit=self.config.backoff_limit)
            self.nodes.append(node)
        return self.nodes

    # ------------------------------------------------------------------ what the cluster says
    def pods(self) -> list[Any]:
        """The run's pods, newest last."""
        items = self.cluster.core().list_namespaced_pod(self.cluster.namespace, _request_timeout=5).items
        return sorted(items, key=lambda p: p.metadata.creation_timestamp)

    def pod_of(self, node: str) -> Any:
        """The live pod of ``node`` (node0, node1, ...): the newest one not being deleted."""
        live = [p for p in self.pods() if (p.metadata.labels or {}).get("chaos/node") == node
                and p.metadata.deletion_timestamp is None]
        if not live:
            raise HarnessError(f"no live pod of {node} in namespace {self.cluster.namespace}")
        return live[-1]

    def _read(self, run: RunContext) -> None:
        now = time.monotonic()
        if now - self._read_at < POLL_S:
            return
        self._read_at = now
        from kubernetes import client

        try:
            jobs = client.BatchV1Api(self.cluster.api).list_namespaced_job(self.cluster.namespace,
                                                                           _request_timeout=5).items
            pods = self.pods()
        except api_errors() as exc:  # the API server under load: read again at the next poll
            run.log("kube_read_error", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        self._jobs = {j.metadata.name: j for j in jobs}
        for node in self.nodes:
            job = self._jobs.get(node.info["job"])
            if job is not None and isinstance(node, KubeNode):
                node.code = job_code(job.status)
        for pod in pods:
            node = (pod.metadata.labels or {}).get("chaos/node", "?")
            for status in pod.status.container_statuses or []:
                cid = (status.container_id or "").removeprefix("docker://")
                if not cid or cid in self._containers or status.state.running is None:
                    continue
                pid = self._container_pid(cid)
                if pid <= 0:
                    continue
                self._containers[cid] = pid
                run.tree.add_root(node, pid)
                run.log("kube_container", node=node, pod=pod.metadata.name, container=cid[:12], pid=pid,
                        restart_count=status.restart_count, pod_uid=pod.metadata.uid)

    @staticmethod
    def _container_pid(cid: str) -> int:
        import docker

        client = docker.from_env()
        try:
            return int(client.api.inspect_container(cid)["State"]["Pid"])
        except (docker.errors.DockerException, KeyError, TypeError, ValueError):
            return 0
        finally:
            client.close()

    def exit_code(self) -> int | None:
        if self.run is not None:
            self._read(self.run)
        return super().exit_code()

    def stop(self, run: RunContext) -> None:
        """Delete the Jobs (their pods with them), then whatever of the run's tree is left."""
        from kubernetes import client

        if self.cluster is not None and self.cluster.pki is not None:
            try:
                client.BatchV1Api(self.cluster.api).delete_collection_namespaced_job(
                    self.cluster.namespace, propagation_policy="Background", grace_period_seconds=0)
            except api_errors() as exc:
                run.log("kube_read_error", error=f"deleting the Jobs: {type(exc).__name__}: {exc}"[:300])
        super().stop(run)

    def teardown(self, run: RunContext) -> list[Any]:
        try:
            return super().teardown(run)
        finally:
            if self.cluster is not None:
                self.cluster.release_lock()
