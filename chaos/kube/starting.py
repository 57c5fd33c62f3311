"""Pods of the run that cannot start: what holds a node's pod before its agent runs, and for how long.

A pod that cannot be scheduled, whose image cannot be pulled, whose config (a secret, a volume) is missing, or a
Job whose pod is refused (a quota, an admission webhook) never says anything to the run: without this the run
would wait out its whole timeout and be judged as a workload that never started. Each is named as the cluster
says it (the pod's condition or the container's waiting reason; for a pod that was never created, the Job's
FailedCreate event), logged when it changes, and ends the run once it has held for ``start_timeout_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                     "CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
"""A container's waiting reasons that mean it cannot start as things are (ContainerCreating and PodInitializing
are a start under way)."""


def hold(pod: Any) -> tuple[str, str] | None:
    """(reason, message) of what keeps ``pod`` from starting, or None: it runs, or its start is under way."""
    status = pod.status
    if status is None:
        return None
    for cond in status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return cond.reason or "Unschedulable", cond.message or ""
    inits = status.init_container_statuses or []
    for s in [*inits, *(status.container_statuses or [])]:
        waiting = s.state.waiting if s.state is not None else None
        # An init container that keeps failing holds the pod for good; the agent's own crash loop is a restart.
        if waiting is not None and (waiting.reason in WAITING or (s in inits and waiting.reason == "CrashLoopBackOff")):
            return waiting.reason, f"container {s.name}: {waiting.message or ''}".rstrip(": ")
    return None


@dataclass
class StartWatch:
    """Per node, what has held its pod since when; ``blocked`` once one has held for ``timeout_s``."""

    timeout_s: float
    held: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    """node -> (reason, message, first seen) while something holds its pod."""
    blocked: str | None = None

    def see(self, node: str, what: tuple[str, str] | None, now: float, log: Callable[..., None],
            explain: Callable[[], tuple[str, str]] | None = None) -> None:
        """Fold one poll's reading of ``node``: ``what`` holds it (None: nothing does). ``explain``: asked once, when
        the hold ends the run, for a better (reason, message) than the poll's (an event read only then)."""
        before = self.held.get(node)
        if what is None:
            if before is not None:
                log("kube_pod_start", node=node, reason=None, message="", held_s=round(now - before[2], 3))
                del self.held[node]
            return
        if before is None or before[0] != what[0]:
            since = before[2] if before is not None else now
            self.held[node] = (what[0], what[1], since)
            log("kube_pod_start", node=node, reason=what[0], message=what[1][:500], held_s=round(now - since, 3))
        reason, message, since = self.held[node]
        if self.blocked is None and now - since >= self.timeout_s:
            if explain is not None:
                reason, message = explain()
                log("kube_pod_start", node=node, reason=reason, message=message[:500], held_s=round(now - since, 3))
            self.blocked = (f"{node}'s pod has not started in {now - since:.0f} s (target.start_timeout_s "
                            f"{self.timeout_s:g}): {reason}" + (f": {message}" if message else ""))


def failed_create(core: Any, namespace: str, job: str, errors: tuple[type, ...]) -> tuple[str, str]:
    """Why the Job ``job`` has no pod: its newest FailedCreate event (a quota, an admission webhook), or what
    stopped the harness from reading its events."""
    try:
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.kind=Job,involvedObject.name={job}",
                                            _request_timeout=5).items
    except errors as exc:
        status = getattr(exc, "status", None)
        why = "the kubeconfig may not list events to say why" if status == 403 else f"its events unread: {exc}"[:200]
        return "NoPod", f"Job {job} has no pod ({why})"
    failed = [e for e in events if e.reason == "FailedCreate"]
    if not failed:
        return "NoPod", f"Job {job} has no pod yet"
    newest = max(failed, key=lambda e: str(e.last_timestamp or e.event_time or e.metadata.creation_timestamp or ""))
    return "FailedCreate", f"Job {job}: {newest.message or ''}"
