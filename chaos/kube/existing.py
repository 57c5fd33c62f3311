"""A user's cluster through its kubeconfig (``cluster: existing``): what the harness may do there, asked first.

The harness creates nothing on a cluster of the user's but the run's own Jobs (labelled ``chaos/run``) in one
namespace that must exist, and reaches the ranks through the API only: it lists and signals them by exec'ing the
harness's step module (chaos/slurm/steps.py, the same one Slurm's srun steps run) in the pods' containers. Every
permission a run needs is asked of the API server before anything is created (SelfSubjectAccessReview, which
every authenticated user may post), so a missing one is refused naming the verb and resource, not met mid-run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.errors import CapabilityError, FaultError
from chaos.kube.minicluster import api_errors


@dataclass(frozen=True)
class Permission:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespaced: bool = True

    def __str__(self) -> str:
        res = f"{self.resource}.{self.group}" if self.group else self.resource
        res = f"{res}/{self.subresource}" if self.subresource else res
        return f"{self.verb} {res}" + ("" if self.namespaced else " (cluster-wide)")


RUN = (Permission("create", "jobs", "batch"), Permission("list", "jobs", "batch"),
       Permission("delete", "jobs", "batch"), Permission("list", "pods"))
"""What every run does: create its Jobs, follow them and their pods, delete them at the end."""
EXEC = (Permission("get", "pods", subresource="exec"), Permission("create", "pods", subresource="exec"),
        Permission("get", "pods"))
"""What reaching the ranks takes: listing and signalling them inside the pods' containers. The client execs over a
websocket, a GET (authorized as ``get pods/exec`` before Kubernetes 1.35, also ``create`` from then on: both asked);
``get pods``: the undo's probe that the pod still runs."""

EXISTING_FAULTS: dict[str, tuple[Permission, ...]] = {
    "pod-delete": (Permission("delete", "pods"),),
    "container-kill": EXEC,
    "node-drain": (Permission("get", "nodes", namespaced=False), Permission("patch", "nodes", namespaced=False),
                   Permission("create", "pods", subresource="eviction")),
    "kill-rank": EXEC,
    "hang-rank": EXEC,
}
"""The faults a run may do on a cluster of the user's, with the permissions each needs beyond the run's own: the
ones that act through the API. The others act on this host's processes, kernel or filesystems."""


def default_kubeconfig() -> str:
    """$KUBECONFIG (one file, or several joined by ':' that are merged as kubectl merges them), else ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def absolute(kubeconfig: str | Path) -> str:
    """Each file of a kubeconfig setting made absolute, still ':'-joined: the ledger's undo commands may run from
    another directory (chaos cleanup)."""
    return os.pathsep.join(str(Path(p).expanduser().resolve()) for p in str(kubeconfig).split(os.pathsep) if p)


class ExistingCluster:
    """The user's cluster: ``api`` and ``core()`` as the local cluster's, plus the permission check and exec."""

    node = None
    """No single node: a fault names the job node whose Kubernetes node it acts on."""

    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str) -> None:
        self.kubeconfig = absolute(kubeconfig or default_kubeconfig())
        """The file, or the ':'-joined files, the client merges (kubernetes.config's KubeConfigMerger, as kubectl)."""
        self.context = context
        self.namespace = namespace
        self._api: Any = None
        self.server = "?"

    @property
    def up(self) -> bool:
        return self._api is not None

    def _client(self) -> Any:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            return config.new_client_from_config(config_file=str(self.kubeconfig), context=self.context)
        except ConfigException as exc:
            raise CapabilityError(f"target kubernetes (cluster: existing): the kubeconfig {self.kubeconfig} "
                                  f"cannot be used{' with context ' + self.context if self.context else ''}: {exc}; "
                                  f"set target.kubeconfig / target.context (kubectl config get-contexts lists "
                                  f"them)") from None

    @property
    def api(self) -> Any:
        if self._api is None:
            raise CapabilityError("target kubernetes (cluster: existing): not connected (check() connects)")
        return self._api

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def connect(self) -> None:
        """Reach the API server and the namespace; raise CapabilityError saying which and what to do."""
        files = [Path(p) for p in self.kubeconfig.split(os.pathsep)]
        unreadable = [str(f) for f in files if f.exists() and not (f.is_file() and os.access(f, os.R_OK))]
        if unreadable or not any(f.is_file() for f in files):  # kubectl, too, skips the files that are not there
            raise CapabilityError(f"target kubernetes (cluster: existing): no readable kubeconfig at "
                                  f"{', '.join(unreadable or map(str, files))}; set target.kubeconfig or $KUBECONFIG")
        api = self._client()
        self.server = api.configuration.host
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.CoreV1Api(api).read_namespace(self.namespace, _request_timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                raise CapabilityError(f"target kubernetes (cluster: existing): namespace {self.namespace} does not "
                                      f"exist on {self.server}; create it (kubectl create namespace "
                                      f"{self.namespace}) or name another") from None
            if exc.status != 403:  # reading a namespace is not needed: what is, is asked below
                raise CapabilityError(f"target kubernetes (cluster: existing): {self.server} answered "
                                      f"{exc.status} {exc.reason}") from None
        except api_errors() as exc:
            raise CapabilityError(f"target kubernetes (cluster: existing): cannot reach the API server {self.server}"
                                  f": {type(exc).__name__}: {str(exc)[:200]}") from None
        self._api = api

    def allowed(self, perm: Permission) -> bool:
        from kubernetes import client

        attrs = client.V1ResourceAttributes(verb=perm.verb, resource=perm.resource, group=perm.group,
                                            subresource=perm.subresource or None,
                                            namespace=self.namespace if perm.namespaced else None)
        body = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))
        try:
            review = client.AuthorizationV1Api(self.api).create_self_subject_access_review(body, _request_timeout=10)
        except api_errors() as exc:
            raise CapabilityError(f"asking {self.server} what this kubeconfig may do failed "
                                  f"(SelfSubjectAccessReview): {type(exc).__name__}: {str(exc)[:200]}") from None
        return bool(review.status.allowed)

    def require(self, perms: tuple[Permission, ...], what: str) -> None:
        """Refuse, before anything is created, naming every permission ``what`` needs and does not have."""
        missing = [str(p) for p in perms if not self.allowed(p)]
        if missing:
            raise CapabilityError(f"{what} on {self.server}: the kubeconfig's user may not {'; '.join(missing)} in "
                                  f"namespace {self.namespace}; grant it (a Role and RoleBinding; a ClusterRole for "
                                  f"what is cluster-wide) or use another context")

    def exec(self, pod: str, container: str, argv: list[str], timeout_s: float = 60.0) -> tuple[int | None, str, str]:
        """Run ``argv`` in a pod's container; (exit code or None if it timed out, stdout, stderr)."""
        from kubernetes import client
        from kubernetes.stream import stream

        from kubernetes.client.exceptions import ApiException

        # A client of its own: the stream helper swaps the client's transport while it runs.
        import websocket

        core = client.CoreV1Api(self._client())
        before = websocket.getdefaulttimeout()
        websocket.setdefaulttimeout(timeout_s)  # the connection's own: the client passes none
        try:
            ws = stream(core.connect_get_namespaced_pod_exec, pod, self.namespace, container=container, command=argv,
                        stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
        except ApiException as exc:
            # The client wraps whatever interrupted the connection, the harness's own Ctrl-C included: that goes on.
            cause = exc.__context__
            if exc.status == 0 and cause is not None and not isinstance(cause, api_errors()):
                raise cause from None
            raise FaultError(f"exec in pod {pod} failed: {str(exc)[:300]}") from None
        except api_errors() as exc:
            raise FaultError(f"exec in pod {pod} failed: {type(exc).__name__}: {str(exc)[:300]}") from None
        finally:
            websocket.setdefaulttimeout(before)
        try:
            ws.run_forever(timeout=timeout_s)
            if ws.is_open():
                return None, ws.read_stdout(), ws.read_stderr()
            out, err = ws.read_stdout(), ws.read_stderr()
            return ws.returncode, out, err
        except (*api_errors(), TypeError, KeyError, ValueError) as exc:  # a pod gone mid-exec: no status, or not a code
            raise FaultError(f"exec in pod {pod} ended without an exit status: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
        finally:
            ws.close()


def wait_gone(list_left: Any, timeout_s: float) -> list[str]:
    """Poll ``list_left()`` (names still there) until it is empty or ``timeout_s`` passed; what is left."""
    deadline = time.monotonic() + timeout_s
    left = list_left()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = list_left()
    return left
