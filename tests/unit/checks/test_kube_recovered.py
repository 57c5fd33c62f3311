"""kube_recovered: a true history of each Kubernetes fault passes with its figures; each lie (a mutation that
breaks exactly the promise: the node never back, back the wrong way, too late, nothing seen before) does not."""

from __future__ import annotations

import copy
from typing import Any

from histsim import make_outcome

from chaos.checks.kube_recovered import KubeRecovered, KubeRecoveredConfig
from chaos.evidence.events import History
from chaos.evidence.outcome import FaultRecord


def seen(t: float, node: str, pod: str, uid: str, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"ev": "kube_container", "t": t, "source": "harness", "node": node, "pod": pod, "pod_uid": uid,
            "container": f"c{t:g}", "pid": 1000 + int(t), "restart_count": restarts, **extra}


def launches(policy: str) -> list[dict[str, Any]]:
    return [{"ev": "node_launch", "t": 0.5, "source": "harness", "node": f"node{k}", "job": f"j-n{k}",
             "restart_policy": policy} for k in (0, 1)]


def start(policy: str = "Never") -> list[dict[str, Any]]:
    return launches(policy) + [seen(2.0, "node0", "j-n0-a", "u0"), seen(2.1, "node1", "j-n1-a", "u1")]


def judge(records: list[dict[str, Any]], fault: FaultRecord, **cfg: Any):
    check = KubeRecovered(KubeRecoveredConfig(**{"max_s": 30, **cfg}))
    return check.evaluate(make_outcome(History(copy.deepcopy(sorted(records, key=lambda r: r["t"]))), faults=[fault]))


def pod_delete() -> FaultRecord:
    return FaultRecord(index=0, kind="pod-delete", label="pod-delete#0", t_inject=10.0, t_revert=90.0,
                       details={"node": "node1", "pod": "j-n1-a", "pod_uid": "u1", "grace_s": 10})


def container_kill() -> FaultRecord:
    return FaultRecord(index=0, kind="container-kill", label="container-kill#0", t_inject=10.0, t_revert=90.0,
                       details={"node": "node1", "pod": "j-n1-a", "container": "c2.1", "signal": "SIGKILL",
                                "restart_count": 0})


def drain() -> FaultRecord:
    return FaultRecord(index=0, kind="node-drain", label="node-drain#0", t_inject=10.0, t_release=25.0,
                       t_revert=90.0, details={"node": "vm", "evicted": ["j-n0-a", "j-n1-a"], "cordoned_s": 15})


def test_a_deleted_pod_replaced_by_a_new_one_passes_with_how_and_how_long() -> None:
    r = judge(start() + [seen(16.0, "node1", "j-n1-b", "u2")], pod_delete())
    assert r.verdict == "pass", r.reason
    assert r.figures["pod-delete#0"]["nodes"]["node1"] == {"how": "a new pod", "back_s": 6.0, "pod": "j-n1-b",
                                                           "restart_count": 0, "job_failed": None,
                                                           "backoff_limit": None, "k8s_node": None,
                                                           "struck_k8s_node": None}


def job(t: float, node: str, failed: int, gave_up: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"ev": "kube_job", "t": t, "source": "harness", "node": node, "job": f"j-{node}", "active": 1,
            "failed": failed, "succeeded": 0, "gave_up": gave_up, **extra}


def test_the_jobs_own_account_of_its_failures_is_in_the_figures() -> None:
    limited = [{**r, "backoff_limit": 2} for r in launches("Never")]
    r = judge(limited + start()[2:] + [job(1.0, "node1", 0), job(12.0, "node1", 1), seen(16.0, "node1", "j-n1-b", "u2"),
                                      job(20.0, "node1", 2)], container_kill())
    assert r.verdict == "pass", r.reason
    figs = r.figures["container-kill#0"]["nodes"]["node1"]
    assert (figs["job_failed"], figs["backoff_limit"]) == (1, 2), figs  # by the time it was back, not after
    assert "its Job counted 1 failed pod(s), backoffLimit 2" in r.reason


def test_under_on_failure_the_figure_is_the_containers_restart_count_not_failed_pods() -> None:
    """The Job counts a restarted container against its backoffLimit, and its status says 0 failed pods: a figure
    of 0 failures for a node that failed and came back would be wrong."""
    limited = [{**r, "backoff_limit": 3} for r in launches("OnFailure")]
    r = judge(limited + start("OnFailure")[2:] + [job(1.0, "node1", 0), seen(13.0, "node1", "j-n1-a", "u1", 1),
                                                  job(14.0, "node1", 0)], container_kill())
    assert r.verdict == "pass", r.reason
    assert "node1 restarted in place 3.0 s after it (its container's restart 1; the Job counts restarts against " \
           "backoffLimit 3)" in r.reason, r.reason
    second_kill = FaultRecord(index=0, kind="container-kill", label="container-kill#0", t_inject=10.0, t_revert=90.0,
                              details={"node": "node1", "pod": "j-n1-a", "container": "c2.5", "signal": "SIGKILL",
                                       "restart_count": 1})
    gave = judge(limited + start("OnFailure")[2:] + [seen(2.5, "node1", "j-n1-a", "u1", 1, container="c2.5"),
                                                     job(12.0, "node1", 0, "BackoffLimitExceeded")], second_kill)
    assert gave.verdict == "fail" and "its Job gave up (BackoffLimitExceeded: after its container's restarts, " \
        "backoffLimit 3)" in gave.reason, gave.reason


def test_a_job_that_gave_up_is_named_as_the_reason_the_node_never_came_back() -> None:
    limited = [{**r, "backoff_limit": 0} for r in launches("Never")]
    r = judge(limited + start()[2:] + [job(12.0, "node1", 1, "BackoffLimitExceeded")], container_kill())
    assert r.verdict == "fail" and "its Job gave up (BackoffLimitExceeded: 1 failed pod(s), backoffLimit 0)" \
        in r.reason, r.reason
    # The give-up of another node, or one a rank claims, is not this node's reason.
    forged = [job(12.0, "node0", 1, "BackoffLimitExceeded"), {**job(12.0, "node1", 1, "X"), "source": "workload"}]
    r = judge(limited + start()[2:] + forged, container_kill())
    assert r.verdict == "fail" and "gave up, or the kubelet left it dead" in r.reason, r.reason


def test_a_deleted_pod_never_recreated_fails() -> None:
    r = judge(start(), pod_delete())
    assert r.verdict == "fail" and "node1 never ran again" in r.reason, r.reason


def test_the_old_pods_container_seen_again_is_not_a_recovery() -> None:
    """A record after the fault of the very pod that was deleted, with its old restart count: nothing new ran."""
    r = judge(start() + [seen(12.0, "node1", "j-n1-a", "u1")], pod_delete())
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason


def test_another_nodes_new_pod_does_not_bring_the_struck_node_back() -> None:
    r = judge(start() + [seen(16.0, "node0", "j-n0-b", "u9")], pod_delete())
    assert r.verdict == "fail" and "node1 never ran again" in r.reason, r.reason


def test_a_new_pod_before_the_fault_is_not_its_recovery() -> None:
    r = judge(start() + [seen(9.0, "node1", "j-n1-b", "u2")], pod_delete())
    assert r.verdict == "fail" and "node1 never ran again" in r.reason, r.reason


def test_back_too_late_fails_with_the_wait() -> None:
    r = judge(start() + [seen(55.0, "node1", "j-n1-b", "u2")], pod_delete())
    assert r.verdict == "fail" and "45.0 s after the fault (bound 30 s)" in r.reason, r.reason


def test_a_killed_container_restarted_in_place_under_on_failure_passes() -> None:
    r = judge(start("OnFailure") + [seen(14.0, "node1", "j-n1-a", "u1", restarts=1)], container_kill())
    assert r.verdict == "pass", r.reason
    assert r.figures["container-kill#0"]["nodes"]["node1"]["how"] == "restarted in place"


def test_a_killed_container_replaced_by_a_new_pod_under_on_failure_fails() -> None:
    r = judge(start("OnFailure") + [seen(14.0, "node1", "j-n1-b", "u2")], container_kill())
    assert r.verdict == "fail" and "should be restarted in place" in r.reason, r.reason


def test_under_never_a_killed_container_must_come_back_as_a_new_pod() -> None:
    assert judge(start("Never") + [seen(14.0, "node1", "j-n1-b", "u2")], container_kill()).verdict == "pass"
    r = judge(start("Never") + [seen(14.0, "node1", "j-n1-a", "u1", restarts=1)], container_kill())
    assert r.verdict == "fail" and "should be a new pod" in r.reason, r.reason


def test_a_container_kill_without_the_nodes_policy_is_not_judged() -> None:
    records = [r for r in start("OnFailure") if r["ev"] != "node_launch"]
    r = judge(records + [seen(14.0, "node1", "j-n1-a", "u1", restarts=1)], container_kill())
    assert r.verdict == "inconclusive" and "restartPolicy of node1 is unknown" in r.reason, r.reason


def test_a_drain_is_timed_from_the_uncordon_and_needs_every_evicted_node_back() -> None:
    back = [seen(27.0, "node0", "j-n0-b", "u3"), seen(27.5, "node1", "j-n1-b", "u4")]
    r = judge(start() + back, drain())
    assert r.verdict == "pass", r.reason
    assert r.figures["node-drain#0"]["nodes"]["node1"]["back_s"] == 17.5
    r = judge(start() + back[:1], drain())
    assert r.verdict == "fail" and "node1 never ran again" in r.reason, r.reason
    r = judge(start() + [seen(70.0, "node0", "j-n0-b", "u3"), back[1]], drain())
    assert r.verdict == "fail" and "after the uncordon" in r.reason, r.reason


def test_nothing_seen_before_the_fault_is_inconclusive_not_a_pass() -> None:
    r = judge(launches("Never") + [seen(16.0, "node1", "j-n1-b", "u2")], pod_delete())
    assert r.verdict == "inconclusive", r.reason
    assert judge(launches("Never") + [seen(27.0, "node0", "j-n0-b", "u3")], drain()).verdict == "inconclusive"


def test_records_a_rank_wrote_are_not_the_harness_seeing_a_container() -> None:
    forged = dict(seen(16.0, "node1", "j-n1-b", "u2"), source="workload")
    r = judge(start() + [forged], pod_delete())
    assert r.verdict == "fail", r.reason


def test_no_kubernetes_fault_is_inconclusive() -> None:
    other = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=10.0, details={})
    assert judge(start(), other).verdict == "inconclusive"


# Lies an adversarial review found (each passed before the check read the fault's own record of what it struck).

def test_a_drain_whose_evicted_pods_were_not_all_seen_is_inconclusive() -> None:
    """node1's evicted pod was never seen: only node0 could be judged, and node1 may never have come back."""
    records = launches("Never") + [seen(2.0, "node0", "j-n0-a", "u0"), seen(27.0, "node0", "j-n0-b", "u3")]
    r = judge(records, drain())
    assert r.verdict == "inconclusive" and "j-n1-a" in r.reason, r.reason


def test_an_evicted_pod_is_not_its_nodes_way_back_and_nothing_counts_before_the_uncordon() -> None:
    d = drain()
    d.details["evicted"] = ["j-n0-a", "j-n1-a", "j-n1-b"]
    lie = start() + [seen(2.2, "node1", "j-n1-b", "u2"), seen(10.2, "node1", "j-n1-b", "u2", restarts=1),
                     seen(27.0, "node0", "j-n0-b", "u3")]
    r = judge(lie, d)
    assert r.verdict == "fail" and "node1 never ran again" in r.reason, r.reason
    early = start() + [seen(12.0, "node0", "j-n0-b", "u3"), seen(12.0, "node1", "j-n1-b", "u4")]
    r = judge(early, drain())
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason


def test_a_drain_is_in_time_when_late_from_the_fault_but_quick_from_the_uncordon() -> None:
    """Back 35 s after the drain but 10 s after its uncordon at 25 s: in time (bound 30 s from the uncordon)."""
    back = [seen(35.0, "node0", "j-n0-b", "u3"), seen(35.5, "node1", "j-n1-b", "u4")]
    r = judge(start() + back, drain())
    assert r.verdict == "pass", r.reason


def test_the_killed_container_itself_seen_late_is_not_a_restart() -> None:
    """The kill struck a container the harness first saw after it (restart 1, already up before the fault)."""
    ck = container_kill()
    ck.details.update(restart_count=1, container="c10.1")
    r = judge(start("OnFailure") + [seen(10.1, "node1", "j-n1-a", "u1", restarts=1)], ck)
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason
    assert judge(start("OnFailure") + [seen(10.1, "node1", "j-n1-a", "u1", restarts=1),
                                       seen(13.0, "node1", "j-n1-a", "u1", restarts=2)], ck).verdict == "pass"


def test_the_killed_pod_itself_seen_late_is_not_a_new_pod() -> None:
    ck = container_kill()
    ck.details.update(pod="j-n1-b", container="c10.1")
    r = judge(start("Never") + [seen(10.1, "node1", "j-n1-b", "u2")], ck)
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason


def test_a_container_record_without_its_pods_uid_proves_nothing() -> None:
    nouid = seen(16.0, "node1", "j-n1-b", "u2")
    del nouid["pod_uid"]
    r = judge(start() + [nouid], pod_delete())
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason
    base = [dict(rec, pod_uid=None) if rec["ev"] == "kube_container" else rec for rec in start("OnFailure")]
    r = judge(base + [dict(seen(14.0, "node1", "j-n1-x", "u1", restarts=1), pod_uid=None)], container_kill())
    assert r.verdict == "inconclusive", r.reason


def test_malformed_fault_records_are_inconclusive_not_a_crash() -> None:
    for evicted in (5, [["x"]], "j-n1-a", None):
        d = drain()
        d.details["evicted"] = evicted
        assert judge(start(), d).verdict == "inconclusive"
    d = drain()
    d.t_release = "25"  # type: ignore[assignment]
    assert judge(start() + [seen(27.0, "node0", "j-n0-b", "u3"), seen(27.5, "node1", "j-n1-b", "u4")],
                 d).verdict == "pass"
    broken = pod_delete()
    broken.details = None  # type: ignore[assignment]
    assert judge(start() + [seen(16.0, "node1", "j-n1-b", "u2")], broken).verdict != "pass"


def test_a_drained_pods_replacement_on_another_node_counts_at_once_and_on_the_drained_node_only_after() -> None:
    """On a cluster of several nodes, node1's evicted pod comes back on node b before the uncordon of a: that is
    its way back (timed from the fault); the same record on the drained node a before the uncordon is not."""
    base = launches("Never") + [seen(2.0, "node0", "j-n0-a", "u0", k8s_node="b"),
                                seen(2.1, "node1", "j-n1-a", "u1", k8s_node="a")]
    f = FaultRecord(index=0, kind="node-drain", label="node-drain#0", t_inject=10.0, t_release=60.0, t_revert=90.0,
                    details={"node": "a", "evicted": ["j-n1-a"], "cordoned_s": 50})
    r = judge(base + [seen(14.0, "node1", "j-n1-b", "u2", k8s_node="b")], f)
    assert r.verdict == "pass" and r.figures["node-drain#0"]["nodes"]["node1"]["back_s"] == 4.0, r.reason
    assert "node1 a new pod on b 4.0 s after it" in r.reason, r.reason  # where it went, said
    r = judge(base + [seen(14.0, "node1", "j-n1-b", "u2", k8s_node="a")], f)
    assert r.verdict == "fail" and "never ran again" in r.reason, r.reason
    r = judge(base + [seen(14.0, "node1", "j-n1-b", "u2")], f)  # where it ran unknown: the uncordon bounds it
    assert r.verdict == "fail", r.reason


def notready() -> FaultRecord:
    return FaultRecord(index=0, kind="node-notready", label="node-notready#0", t_inject=10.0, t_release=40.0,
                       t_revert=40.0, details={"node": "vm", "kubelet_pid": 77, "stopped_s": 30})


def evicted(pods: Any, t: float = 40.0, index: int = 0) -> dict[str, Any]:
    return {"ev": "kube_evicted", "t": t, "source": "harness", "fault": "node-notready#0", "index": index,
            "node": "vm", "pods": pods}


def test_a_notready_nodes_evicted_pods_come_back_as_new_pods_counted_from_the_kubelets_resume() -> None:
    truth = start() + [evicted(["j-n0-a", "j-n1-a"]), seen(44.0, "node0", "j-n0-b", "u2"),
                       seen(45.0, "node1", "j-n1-b", "u3")]
    r = judge(truth, notready())
    assert r.verdict == "pass", r.reason
    assert r.figures["node-notready#0"]["nodes"]["node1"]["how"] == "a new pod"
    # Lies: one node never back; back only as the evicted pod itself; back too late after the resume.
    assert judge(truth[:-1], notready()).verdict == "fail"
    assert judge(start() + [evicted(["j-n0-a", "j-n1-a"]), seen(44.0, "node0", "j-n0-b", "u2"),
                            seen(45.0, "node1", "j-n1-a", "u1")], notready()).verdict == "fail"
    late = judge(start() + [evicted(["j-n0-a", "j-n1-a"]), seen(44.0, "node0", "j-n0-b", "u2"),
                            seen(75.0, "node1", "j-n1-b", "u3")], notready())
    assert late.verdict == "fail" and "after the kubelet's resume" in late.reason, late.reason
    # A replacement seen while the kubelet was stopped cannot have started on the NotReady node.
    early = judge(start() + [evicted(["j-n0-a", "j-n1-a"]), seen(20.0, "node0", "j-n0-b", "u2", k8s_node="vm"),
                             seen(21.0, "node1", "j-n1-b", "u3", k8s_node="vm")], notready())
    assert early.verdict == "fail", early.reason


def test_a_notready_outage_without_its_record_of_evictions_is_inconclusive() -> None:
    r = judge(start() + [evicted(["j-n1-a"], index=3)], notready())
    assert r.verdict == "inconclusive" and "no record of the pods evicted" in r.reason, r.reason
    r = judge(start() + [evicted("j-n1-a")], notready())
    assert r.verdict == "inconclusive" and "malformed" in r.reason, r.reason


def steps_of(node: str, *ts: float) -> list[dict[str, Any]]:
    return [{"ev": "step", "t": t, "host": node, "pid": 500, "rank": int(node[-1]), "world_size": 2,
             "attempt": "0.0", "step": int(t), "epoch": 0} for t in ts]


def test_a_notready_node_whose_pods_were_not_evicted_rode_it_out_when_its_ranks_trained_on() -> None:
    """One node, all NotReady: Kubernetes evicts nothing (the node controller's master disruption mode); the job
    trains through the outage. Proven by no new container and each node's steps after the kubelet's resume."""
    events = {"ev": "kube_events", "t": 41.0, "source": "harness", "index": 0, "node": "vm", "ready_again": True,
              "events": [{"t": 25.0, "reason": "NodeNotReady", "kind": "Node", "name": "vm"},
                         {"t": 25.0, "reason": "NodeNotReady", "kind": "Pod", "name": "j-n0-a"},
                         {"t": 40.0, "reason": "NodeReady", "kind": "Node", "name": "vm"}]}
    base = [dict(r, k8s_node="vm") if r["ev"] == "kube_container" else r for r in start()]
    truth = base + [evicted([]), events] + steps_of("node0", 12.0, 41.0) + steps_of("node1", 12.0, 41.5)
    r = judge(truth, notready())
    assert r.verdict == "pass", r.reason
    figs = r.figures["node-notready#0"]
    assert figs["notready_s"] == 15.0 and figs["ready_again_s"] == 30.0
    assert figs["nodes"]["node1"]["how"] == "rode it out (not evicted)" and "NotReady 15 s after it" in r.reason
    # Lies: a node that stopped training at the outage; a node restarted although nothing was evicted.
    stalled = judge(base + [evicted([]), events] + steps_of("node0", 12.0, 41.0) + steps_of("node1", 12.0), notready())
    assert stalled.verdict == "fail" and "node1 was not evicted and did not train" in stalled.reason
    restarted = judge(truth + [seen(42.0, "node1", "j-n1-b", "u3", k8s_node="vm")], notready())
    assert restarted.verdict == "fail" and "yet node1 started container" in restarted.reason


def test_a_notready_nodes_recovery_counts_from_the_kubelets_resume_not_the_end_of_the_revert() -> None:
    """A review's lie: the revert waited for Ready and read the Events, ending 30 s after the SIGCONT; new pods 55 s
    after the resume are late however soon after the revert's end they came."""
    slow_revert = FaultRecord(index=0, kind="node-notready", label="node-notready#0", t_inject=10.0, t_release=70.0,
                              t_revert=70.0, details={"node": "vm", "kubelet_pid": 77, "stopped_s": 30})
    record = dict(evicted(["j-n0-a", "j-n1-a"]), t_resume=40.0)
    r = judge(start() + [record, seen(95.0, "node0", "j-n0-b", "u2"), seen(96.0, "node1", "j-n1-b", "u3")],
              slow_revert)
    assert r.verdict == "fail" and "after the kubelet's resume" in r.reason, r.reason


def test_riding_it_out_needs_the_cluster_to_have_seen_the_outage() -> None:
    """No pod evicted, the ranks trained on: a pass only where the cluster's Events show the node NotReady and then
    Ready again; else the outage may never have happened (the SIGSTOP missed, or shorter than the grace period)."""
    base = [dict(r, k8s_node="vm") if r["ev"] == "kube_container" else r for r in start()]
    trained = steps_of("node0", 12.0, 41.0) + steps_of("node1", 12.0, 41.5)
    for events in ([], [{"t": 40.0, "reason": "NodeReady", "kind": "Node", "name": "vm"}],
                   [{"t": 25.0, "reason": "NodeNotReady", "kind": "Node", "name": "vm"}]):
        record = {"ev": "kube_events", "t": 41.0, "source": "harness", "index": 0, "node": "vm", "events": events}
        r = judge(base + [evicted([]), record] + trained, notready())
        assert r.verdict == "inconclusive" and "do not show the node NotReady" in r.reason, (events, r.reason)
    r = judge(base + [evicted([])] + trained, notready())
    assert r.verdict == "inconclusive", r.reason
    # A listing that failed is no "nothing evicted".
    r = judge(base + [evicted(None)] + trained, notready())
    assert r.verdict == "inconclusive" and "malformed" in r.reason, r.reason


def spawn(t: float, node: str, launch: Any) -> dict[str, Any]:
    return {"ev": "worker_spawn", "t": t, "source": "harness", "worker_pid": 700 + int(t), "rank": int(node[-1]),
            "node": node, "attempt": f"{launch}.0", "generation": 1, "launch": launch}


def evicted_elsewhere() -> tuple[FaultRecord, list[dict[str, Any]]]:
    """node1's Kubernetes node vm-n1 NotReady from 10 s to its kubelet's resume at 50 s; node1's pod evicted, its
    replacement on vm at 33 s, beside it; both nodes' workers of launch 0 before the fault."""
    fault = FaultRecord(index=0, kind="node-notready", label="node-notready#0", t_inject=10.0, t_release=50.0,
                        t_revert=50.0, details={"node": "vm-n1", "kubelet_pid": 77, "stopped_s": 40})
    return fault, launches("Never") + [seen(2.0, "node0", "j-n0-a", "u0", k8s_node="vm"),
                                       seen(2.1, "node1", "j-n1-a", "u1", k8s_node="vm-n1"),
                                       spawn(3.0, "node0", 0), spawn(3.0, "node1", 0),
                                       dict(evicted(["j-n1-a"], t=50.0), node="vm-n1", t_resume=50.0),
                                       seen(33.0, "node1", "j-n1-b", "u2", k8s_node="vm")]


def test_a_replacement_beside_its_still_running_evicted_pod_is_back_only_when_its_own_workers_start() -> None:
    """Two Kubernetes nodes: node1's node (vm-n1) goes NotReady, its pod is evicted and the Job's replacement starts
    on vm at once, while the evicted pod's containers train on (their kubelet is stopped). The replacement's agent
    is a spare until the evicted pod ends: the node is back when workers of a later launch start, not when the
    replacement's container did. A job that ended first never brought it back."""
    fault, base = evicted_elsewhere()
    truth = base + [spawn(57.0, "node0", 0), spawn(57.5, "node1", 1)]
    r = judge(truth, fault, max_s=45)
    assert r.verdict == "pass", r.reason
    assert r.figures["node-notready#0"]["nodes"]["node1"]["trained_s"] == 47.5
    assert "node1 a new pod on vm 23.0 s after it, its workers from 47.5 s after it" in r.reason, r.reason
    # Lies: the spare never trained (the job ended first); the evicted pod's own agent restarting its workers.
    spare = judge(base + [spawn(57.0, "node0", 0)], fault, max_s=45)
    assert spare.verdict == "fail" and "never started workers" in spare.reason, spare.reason
    old = judge(base + [spawn(40.0, "node0", 0), spawn(40.0, "node1", 0)], fault, max_s=45)
    assert old.verdict == "fail" and "never started workers" in old.reason, old.reason
    # Workers of unknown launch before the fault: which container they were in cannot be told.
    unknown = [dict(r, launch=None) if r["ev"] == "worker_spawn" else r for r in truth]
    r = judge(unknown, fault, max_s=45)
    assert r.verdict == "inconclusive" and "no launch number" in r.reason, r.reason
    # On the struck node itself after the resume (one node, or the same node Ready again): no spare, as before.
    same = [dict(r, k8s_node="vm-n1") if r.get("pod") == "j-n1-b" else r for r in base]
    r = judge([dict(x, t=52.0) if x.get("pod") == "j-n1-b" else x for x in same], fault, max_s=45)
    assert r.verdict == "pass" and "trained_s" not in r.figures["node-notready#0"]["nodes"]["node1"], r.reason


def test_a_replacement_beside_its_evicted_pod_is_judged_by_its_own_workers_in_time_and_before_the_next_fault() -> None:
    """A review's lies against the rule above: workers that came far too late; workers of a pod a later fault made;
    a replacement on another node just after the resume (the kubelet still ending the evicted pod); the struck
    launch taken from an older container's record; no record of the resume."""
    fault, base = evicted_elsewhere()
    late = judge(base + [spawn(1000.0, "node0", 0), spawn(1000.5, "node1", 1)], fault, max_s=45)
    assert late.verdict == "fail" and "950.5 s after the kubelet's resume" in late.reason, late.reason
    later_fault = FaultRecord(index=1, kind="pod-delete", label="pod-delete#1", t_inject=100.0, t_revert=130.0,
                              details={"node": "node1", "pod": "j-n1-b", "pod_uid": "u2", "grace_s": 10})
    check = KubeRecovered(KubeRecoveredConfig(max_s=45))
    records = base + [spawn(57.0, "node0", 0), seen(110.0, "node1", "j-n1-c", "u3", k8s_node="vm"),
                      spawn(90.0, "node1", 0), spawn(120.0, "node1", 2)]
    r = check.evaluate(make_outcome(History(copy.deepcopy(sorted(records, key=lambda x: x["t"]))),
                                    faults=[fault, later_fault]))
    assert r.verdict == "fail" and "never started workers" in r.reason, r.reason
    just_after = [dict(x, t=51.0) if x.get("pod") == "j-n1-b" else x for x in base]
    r = judge(just_after + [spawn(57.0, "node0", 0)], fault, max_s=45)
    assert r.verdict == "fail" and "never started workers" in r.reason, r.reason
    two_containers = base + [spawn(4.0, "node1", 1), spawn(40.0, "node1", 1)]  # launch 1 before the fault, again
    r = judge(two_containers, fault, max_s=45)
    assert r.verdict == "fail" and "never started workers" in r.reason, r.reason
    no_resume = [dict(x, t_resume=None) if x["ev"] == "kube_evicted" else x for x in base]
    unknown = copy.deepcopy(fault)
    unknown.t_release = None  # no resume recorded, and no release to stand for it
    r = judge(no_resume + [spawn(57.0, "node0", 0), spawn(57.5, "node1", 1)], unknown, max_s=45)
    assert r.verdict == "inconclusive" and "no record of the kubelet's resume" in r.reason, r.reason
