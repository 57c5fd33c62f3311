"""``kube_recovered``: after each Kubernetes fault, the struck node ran again, the way its pods' policy says, in time.

Judged from the harness's own ``kube_container`` records (each container it saw start: node, pod, pod uid,
restart count, time) and ``node_launch`` (each node's restartPolicy), for each ``pod-delete``,
``container-kill``, ``node-drain`` and ``node-notready`` fault (the pods it evicted: its ``kube_evicted`` record; its
new pods count from the kubelet's resume, as a drain's from the uncordon):

* the node it struck (a drain: every node whose pod it evicted) had a container running before it (the
  baseline: its pod and restart count);
* after it, that node ran a container again within ``max_s``: a new pod (the Job controller replaced the
  deleted, evicted or failed one) or the same pod with a higher restart count than the struck container's (the
  kubelet restarted it in place); never the struck pod or container itself (what the fault's record names). A
  drain's new pods on the drained node count from its uncordon (they cannot start there before) and its bound
  runs from there; a new pod on another node of the cluster counts at once;
* the way matches the policy: a deleted or evicted pod is replaced by a new one; a killed container is
  restarted in place under ``OnFailure`` and replaced by a new pod under ``Never``. A pod that was never
  recreated (the Job gave up: backoffLimit used up) or a container the kubelet left dead fails.

The figures are the recovery in Kubernetes terms: how the node came back, how long it took, and the Job's own
account then (``kube_job``: the failed pods it counted against its backoffLimit). A node that never came back is
failed naming why where its Job said (gave up: BackoffLimitExceeded, with the count).

INCONCLUSIVE: none of those faults; no container of a struck node seen before the fault (what came back
cannot be told from what was there); a node-drain whose evicted pods the harness never saw (which nodes it
struck is unknown, also when only some were seen); a container-kill on a node whose restartPolicy no record
says. A container record without a pod uid, a pod name or a restart count proves nothing and is not read.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.events import History
from chaos.evidence.harness_records import KubeContainer, KubeEvents, KubeEvicted, KubeJob, NodeLaunch, WorkerSpawn

KINDS = ("pod-delete", "container-kill", "node-drain", "node-notready")


class KubeRecoveredConfig(CheckConfig):
    max_s: float = Field(default=60.0, gt=0)
    """Each struck node runs a container again within this many seconds of the fault (of the uncordon, for a drain)."""


class KubeRecovered(Check, kind="kube_recovered"):
    """After each Kubernetes fault, the struck node ran again, the way its pods' policy says, in time."""

    Config = KubeRecoveredConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = [f for f in outcome.injected_faults if f.kind in KINDS]
        if not faults:
            return self.inconclusive(f"no {', '.join(KINDS)} fault was injected: no Kubernetes recovery to judge")
        failed, figures = self.judge_each(faults, lambda f: self._judge(f, outcome))
        if failed:
            return failed
        for label, figs in figures.items():
            if figs.get("inconclusive"):
                return self.inconclusive(f"{label}: {figs['inconclusive']}", **figures)
        parts = [f"{label}: " + _outage_said(figs) + "; ".join(
            f"{n} {w['how']}: still training {w['back_s']:.1f} s after it, the kubelet back" if w["how"].startswith("rode")
            else f"{n} {w['how']}{_elsewhere(w)} {w['back_s']:.1f} s after it{_joined(w)}{_backoff(w)}"
            for n, w in figs["nodes"].items())
                 for label, figs in figures.items()]
        return self.passed("; ".join(parts), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        h = outcome.history
        # Evidence only: the harness's own records, each with a time, a pod uid and a restart count.
        seen = sorted((r for r in h.harness(KubeContainer) if _usable(r)), key=lambda r: r.t)
        policies = {r.node: r.restart_policy for r in h.harness(NodeLaunch)}
        limits = {r.node: r.backoff_limit for r in h.harness(NodeLaunch)}
        figs: dict[str, Any] = {"nodes": {}}
        details = fault.details if isinstance(fault.details, dict) else {}
        t0 = float(fault.t_inject or 0.0)
        struck_pods: set[str] = set()
        if fault.kind == "node-notready":
            # The pods the taint manager evicted while the kubelet was stopped, as the fault found them at the resume.
            found = [r for r in h.harness(KubeEvicted) if r.index == fault.index and r.t >= t0]
            if not found:
                figs["inconclusive"] = "the fault left no record of the pods evicted while the node was NotReady"
                return None, figs
            # Its new pods count from the kubelet's resume (the SIGCONT), not from the end of the revert.
            resumed = found[0].t_resume
            # The pods as written (by name, not ``KubeEvicted.pods``): a malformed list is named below as it was.
            details = {**details, "evicted": found[0].get("pods"),
                       "resumed": resumed if resumed is not None else fault.t_release}
            figs.update(_outage(h, fault))
            if details["evicted"] == []:
                return self._rode_out(fault, details, seen, h, figs)
        if fault.kind in ("node-drain", "node-notready"):
            evicted = details.get("evicted")
            if not isinstance(evicted, list) or not all(isinstance(p, str) for p in evicted):
                figs["inconclusive"] = f"the drain's record of the pods it evicted is malformed: {evicted!r}"
                return None, figs
            struck_pods = set(evicted)
            owner = {r.pod: str(r.node) for r in seen if r.t <= t0}
            unseen = sorted(p for p in struck_pods if p not in owner)
            if unseen or not struck_pods:
                figs["inconclusive"] = ("the harness never saw a container of the evicted pod(s) "
                                        f"{', '.join(unseen) or '(none listed)'}: which nodes the drain struck is unknown")
                return None, figs
            nodes = sorted({owner[p] for p in struck_pods})
        else:
            nodes = [str(details.get("node"))]
            # A deleted pod never comes back; a killed container's pod may (restarted in place): only the container
            # itself is excluded then.
            if fault.kind == "pod-delete" and isinstance(details.get("pod"), str):
                struck_pods = {details["pod"]}
        release = fault.t_release if isinstance(fault.t_release, (int, float)) else None
        if fault.kind == "node-notready":
            release = details.get("resumed") if isinstance(details.get("resumed"), (int, float)) else None
            if release is None:
                figs["inconclusive"] = "the fault has no record of the kubelet's resume: what ran after it is unknown"
                return None, figs
        # A drained node's pods cannot start before the uncordon (a NotReady one's before its kubelet is back): what
        # ran before it is not the way back.
        start = max(t0, release) if fault.kind in ("node-drain", "node-notready") and release is not None else t0
        for node in nodes:
            before = [r for r in seen if r.node == node and r.t <= t0]
            struck = [r for r in before if r.container == details.get("container")] or before
            if not struck:
                figs["inconclusive"] = f"no container of {node} was seen before the fault: what came back is unknown"
                return None, figs
            base = struck[-1]
            named = [r.pod_uid for r in seen if r.pod == details.get("pod")]
            struck_uid = (details["pod_uid"] if isinstance(details.get("pod_uid"), str)
                          else named[0] if named else base.pod_uid)
            count = max(_count(base), details["restart_count"] if isinstance(details.get("restart_count"), int) else 0)
            # The uncordon bounds only what runs on the drained node: on a cluster of several, an evicted pod's
            # replacement may start elsewhere at once (a record that does not say where is taken as the drained one).
            after = [r for r in seen if r.node == node and r.t > t0
                     and (r.t >= start or r.k8s_node not in (None, details.get("node")))
                     and r.pod not in struck_pods and r.container != details.get("container")
                     and (r.pod_uid != struck_uid or _count(r) > count)]
            jobs = [r for r in h.harness(KubeJob) if r.node == node]
            if not after:
                gave_up = next((r for r in jobs if r.t > t0 and r.gave_up is not None), None)
                # Under OnFailure the Job counts its container's restarts, which its status does not give (and a
                # restart that died between two reads was never seen): no count rather than a wrong one.
                counted = ("after its container's restarts" if policies.get(node) == "OnFailure"
                           else f"{gave_up.failed if gave_up else '?'} failed pod(s)")
                why = (f"its Job gave up ({gave_up.gave_up}: {counted}, backoffLimit "
                       f"{limits.get(node, '?')})" if gave_up is not None
                       else "the Job gave up, or the kubelet left it dead")
                return f"{node} never ran again after it: no new pod and no restarted container ({why})", figs
            back = after[0]
            how = "a new pod" if back.pod_uid != struck_uid else "restarted in place"
            # The Job's own account when the node was back: the failures it counted against its backoffLimit.
            failed = [r.failed for r in jobs if r.t <= back.t and r.failed is not None]
            figs["nodes"][node] = {"how": how, "back_s": round(back.t - t0, 3), "pod": back.pod,
                                   "k8s_node": back.k8s_node, "struck_k8s_node": details.get("node") if
                                   fault.kind in ("node-drain", "node-notready") else base.k8s_node,
                                   "restart_count": back.restart_count,
                                   "job_failed": failed[-1] if failed else None, "backoff_limit": limits.get(node)}
            expected = _expected(fault.kind, policies.get(node))
            if expected is None:
                figs["inconclusive"] = (f"the restartPolicy of {node} is unknown (no node_launch record says it): "
                                        f"whether {how} was the right way back cannot be judged")
                return None, figs
            if how != expected:
                return (f"{node} came back as {how}, but {fault.kind} under restartPolicy {policies.get(node)} "
                        f"should be {expected}"), figs
            if fault.kind == "node-notready" and release is not None \
                    and back.k8s_node not in (None, details.get("node")):
                nxt = [f.t_inject for f in outcome.faults if isinstance(f.t_inject, (int, float)) and f.t_inject > t0]
                problem = _beside(h, node, (t0, release, min(nxt, default=None)), back, figs, self.config.max_s)
                if problem or figs.get("inconclusive"):
                    return problem, figs
            since_t = start if back.k8s_node in (None, details.get("node")) else t0
            waited = back.t - since_t
            if waited > self.config.max_s:
                since = ("the kubelet's resume" if fault.kind == "node-notready" else "the uncordon") \
                    if since_t > t0 else "the fault"
                return f"{node} ran again {waited:.1f} s after {since} (bound {self.config.max_s:g} s)", figs
        return None, figs


    def _rode_out(self, fault: FaultRecord, details: dict[str, Any], seen: list[KubeContainer], h: History,
                  figs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """A NotReady node whose pods were not evicted (the outage was shorter than the node controller's grace
        and the pods' toleration, or every node of the zone was NotReady, when Kubernetes evicts nothing): its
        containers never stopped. Proven by no new container of its job nodes since the fault, and their ranks'
        steps after the kubelet was back, within ``max_s``."""
        t0 = float(fault.t_inject or 0.0)
        resumed = details.get("resumed")
        if not isinstance(resumed, (int, float)):
            figs["inconclusive"] = "the fault has no record of the kubelet's resume: what ran after it is unknown"
            return None, figs
        # Riding it out proves something only if there was an outage: the cluster saw the node NotReady, and back.
        if figs.get("notready_s") is None or figs.get("ready_again_s") is None:
            figs["inconclusive"] = ("the cluster's Events do not show the node NotReady and then Ready again after the "
                                    "fault (the outage shorter than the node controller's grace period, or the Events "
                                    "not read): nothing was evicted, and nothing shows there was an outage to ride out")
            return None, figs
        nodes = sorted({str(r.node) for r in seen if r.t <= t0 and r.k8s_node in (None, details.get("node"))})
        if not nodes:
            figs["inconclusive"] = "no container was seen on the NotReady node before the fault: what rode it out is unknown"
            return None, figs
        for node in nodes:
            again = [r for r in seen if r.node == node and r.t > t0]
            if again:
                return (f"nothing was evicted while the node was NotReady, yet {node} started container "
                        f"{again[0].container} {again[0].t - t0:.1f} s after the fault"), figs
            steps = [r.t for r in h.of("step") if str(r.host) == node and r.t >= resumed]
            if not steps:
                return (f"{node} was not evicted and did not train after the kubelet's resume: its ranks reported no "
                        f"step since"), figs
            waited = steps[0] - resumed
            figs["nodes"][node] = {"how": "rode it out (not evicted)", "back_s": round(steps[0] - t0, 3),
                                   "pod": None, "restart_count": None, "job_failed": None, "backoff_limit": None}
            if waited > self.config.max_s:
                return f"{node} trained again {waited:.1f} s after the kubelet's resume (bound {self.config.max_s:g} s)", figs
        return None, figs


def _outage(h: History, fault: FaultRecord) -> dict[str, Any]:
    """The cluster's own account of a NotReady node (the fault's ``kube_events`` record): when the node controller
    saw it NotReady and when the kubelet said it was Ready again after that, in seconds from the fault."""
    t0 = float(fault.t_inject or 0.0)
    found = [r for r in h.harness(KubeEvents) if r.index == fault.index and r.t >= t0]
    events = found[0].events if found else None
    if events is None:
        return {"notready_s": None, "ready_again_s": None}

    def first(reason: str, since: float) -> float | None:
        # Events carry whole seconds: one stamped in the second the fault struck counts. Each is the cluster's own
        # object as the API gave it (its fields the cluster's, not the harness's): read by name.
        times = [e["t"] for e in events if isinstance(e, dict) and e.get("reason") == reason and e.get("kind") == "Node"
                 and isinstance(e.get("t"), (int, float)) and e["t"] >= since - 1]
        return min(times) if times else None

    notready = first("NodeNotReady", t0)
    ready = first("NodeReady", notready + 1) if notready is not None else None
    return {"notready_s": round(notready - t0, 3) if notready is not None else None,
            "ready_again_s": round(ready - t0, 3) if ready is not None else None}


def _outage_said(figs: dict[str, Any]) -> str:
    """How the cluster saw a NotReady node, where it said (its Events)."""
    said = [f"{what} {figs[key]:.0f} s after it" for key, what in (("notready_s", "NotReady"),
                                                                   ("ready_again_s", "Ready again"))
            if isinstance(figs.get(key), (int, float))]
    return f"the node went {' and '.join(said)} (the cluster's Events); " if said else ""


def _beside(h: History, node: str, times: tuple[float, float, float | None], back: KubeContainer,
            figs: dict[str, Any], max_s: float) -> str | None:
    """A replacement on another node of an evicted pod whose containers still ran (their kubelet stopped: nothing
    could end them; and after its resume, until it has) is not yet the node back: its agent waits as a spare in
    the rendezvous until the evicted pod ends, and a job that ends first never used it. The node is back when
    workers of a later launch than any of its workers before the fault (``worker_spawn``'s ``launch``) start
    after the replacement did and before the next fault, within ``max_s`` of the kubelet's resume."""
    t0, resumed, next_fault = times
    spawns = [r for r in h.harness(WorkerSpawn) if r.node == node]
    before = [r.launch for r in spawns if r.t <= t0]
    struck = max((x for x in before if x is not None), default=None)
    if struck is None or None in before:
        figs["inconclusive"] = (f"{node}'s replacement started on {back.k8s_node} while the evicted pod ran on, "
                                f"and no launch number says which container {node}'s workers before the fault were "
                                f"in: whether the replacement ever trained is unknown")
        return None
    later = [r for r in spawns if r.t >= back.t and (launch := r.launch) is not None and launch > struck
             and (next_fault is None or r.t < next_fault)]
    if not later:
        return (f"{node}'s replacement pod started on {back.k8s_node} {back.t - t0:.1f} s after it, beside the "
                f"evicted pod (its kubelet stopped), and never started workers: a spare while the evicted pod "
                f"trained on")
    figs["nodes"][node]["trained_s"] = round(later[0].t - t0, 3)
    waited = later[0].t - resumed
    if waited > max_s:
        return (f"{node}'s replacement on {back.k8s_node} started workers only {waited:.1f} s after the "
                f"kubelet's resume (bound {max_s:g} s)")
    return None


def _joined(figs: dict[str, Any]) -> str:
    """When a replacement that ran beside its evicted pod started training."""
    t = figs.get("trained_s")
    return f", its workers from {t:.1f} s after it" if isinstance(t, (int, float)) else ""


def _elsewhere(figs: dict[str, Any]) -> str:
    """Where a replacement ran, when that was not the struck Kubernetes node (a cluster of several)."""
    where, struck = figs.get("k8s_node"), figs.get("struck_k8s_node")
    return f" on {where}" if isinstance(where, str) and isinstance(struck, str) and where != struck else ""


def _backoff(figs: dict[str, Any]) -> str:
    """The Job's account against its backoffLimit when the node was back. Restarted in place (OnFailure), the Job
    counts its container's restarts, not failed pods (its status says 0 failed): the restart count is the figure."""
    limit = figs.get("backoff_limit", "?")
    if figs.get("how") == "restarted in place" and isinstance(figs.get("restart_count"), int):
        return f" (its container's restart {figs['restart_count']}; the Job counts restarts against backoffLimit {limit})"
    if figs.get("job_failed") is None:
        return ""
    return f" (its Job counted {figs['job_failed']} failed pod(s), backoffLimit {limit})"


def _usable(rec: KubeContainer) -> bool:
    """A container record that can prove something: its pod's uid, its restart count and its pod's name."""
    return bool(rec.pod_uid) and rec.pod is not None and rec.restart_count is not None


def _count(rec: KubeContainer) -> int:
    return rec.restart_count if rec.restart_count is not None else 0


def _expected(kind: str, policy: Any) -> str | None:
    """How the node must come back: a deleted or evicted pod is replaced; a killed container is restarted in
    place under OnFailure and replaced under Never. None: the policy is unknown."""
    if kind in ("pod-delete", "node-drain", "node-notready"):
        return "a new pod"
    return {"OnFailure": "restarted in place", "Never": "a new pod"}.get(str(policy))
