"""``kube_recovered``: after each Kubernetes fault, the struck node ran again, the way its pods' policy says, in time.

Judged from the harness's own ``kube_container`` records (each container it saw start: node, pod, pod uid,
restart count, time) and ``node_launch`` (each node's restartPolicy), for each ``pod-delete``,
``container-kill`` and ``node-drain`` fault:

* the node it struck (a drain: every node whose pod it evicted) had a container running before it (the
  baseline: its pod and restart count);
* after it, that node ran a container again within ``max_s``: a new pod (the Job controller replaced the
  deleted, evicted or failed one) or the same pod with a higher restart count (the kubelet restarted the
  container in place). A drain's bound runs from the node's uncordon: its pods cannot start before;
* the way matches the policy: a deleted or evicted pod is replaced by a new one; a killed container is
  restarted in place under ``OnFailure`` and replaced by a new pod under ``Never``. A pod that was never
  recreated (the Job gave up: backoffLimit used up) or a container the kubelet left dead fails.

The figures are the recovery in Kubernetes terms: how the node came back and how long it took.

INCONCLUSIVE: none of those faults; no container of a struck node seen before the fault (what came back
cannot be told from what was there); a node-drain whose evicted pods the harness never saw (which nodes it
struck is unknown); a container-kill on a node whose restartPolicy no record says.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome

KINDS = ("pod-delete", "container-kill", "node-drain")


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
        parts = [f"{label}: " + "; ".join(f"{n} {w['how']} {w['back_s']:.1f} s after it" for n, w in figs["nodes"].items())
                 for label, figs in figures.items()]
        return self.passed("; ".join(parts), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        h = outcome.history
        seen = sorted((r for r in h.of("kube_container") if r.get("source") == "harness"), key=lambda r: r.t)
        policies = {r.get("node"): r.get("restart_policy") for r in h.of("node_launch") if r.get("source") == "harness"}
        figs: dict[str, Any] = {"nodes": {}}
        t0 = float(fault.t_inject or 0.0)
        if fault.kind == "node-drain":
            evicted = set(fault.details.get("evicted") or [])
            nodes = sorted({str(r.get("node")) for r in seen if r.get("pod") in evicted and r.t <= t0})
            if not nodes:
                figs["inconclusive"] = ("the harness never saw a container of the pods it evicted "
                                        f"({', '.join(sorted(evicted)) or 'none'}): which nodes it struck is unknown")
                return None, figs
        else:
            nodes = [str(fault.details.get("node"))]
        for node in nodes:
            before = [r for r in seen if r.get("node") == node and r.t <= t0]
            if not before:
                figs["inconclusive"] = f"no container of {node} was seen before the fault: what came back is unknown"
                return None, figs
            base = before[-1]
            struck_uid = fault.details.get("pod_uid") or base.get("pod_uid")
            after = [r for r in seen if r.get("node") == node and r.t > t0 and (
                r.get("pod_uid") != struck_uid or _count(r) > _count(base))]
            start = max(t0, fault.t_release or t0) if fault.kind == "node-drain" else t0
            if not after:
                return (f"{node} never ran again after it: no new pod and no restarted container (the Job gave up, "
                        f"or the kubelet left it dead)"), figs
            back = after[0]
            how = "a new pod" if back.get("pod_uid") != struck_uid else "restarted in place"
            waited = back.t - start
            figs["nodes"][node] = {"how": how, "back_s": round(back.t - t0, 3), "pod": back.get("pod"),
                                   "restart_count": back.get("restart_count")}
            expected = _expected(fault.kind, policies.get(node))
            if expected is None:
                figs["inconclusive"] = (f"the restartPolicy of {node} is unknown (no node_launch record says it): "
                                        f"whether {how} was the right way back cannot be judged")
                return None, figs
            if how != expected:
                return (f"{node} came back as {how}, but {fault.kind} under restartPolicy {policies.get(node)} "
                        f"should be {expected}"), figs
            if waited > self.config.max_s:
                since = "the uncordon" if start > t0 else "the fault"
                return f"{node} ran again {waited:.1f} s after {since} (bound {self.config.max_s:g} s)", figs
        return None, figs


def _count(rec: Any) -> int:
    value = rec.get("restart_count")
    return value if isinstance(value, int) else 0


def _expected(kind: str, policy: Any) -> str | None:
    """How the node must come back: a deleted or evicted pod is replaced; a killed container is restarted in
    place under OnFailure and replaced under Never. None: the policy is unknown."""
    if kind in ("pod-delete", "node-drain"):
        return "a new pod"
    return {"OnFailure": "restarted in place", "Never": "a new pod"}.get(str(policy))
