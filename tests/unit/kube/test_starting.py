"""A pod held from starting is named as the cluster says it and ends the run after start_timeout_s; a start under
way, a running agent and a hold that clears in time do not."""

from __future__ import annotations

from kubernetes import client

from chaos.kube.starting import StartWatch, failed_create, hold


def _pod(conditions=(), waiting: tuple[str, str] | None = None, running: bool = False) -> client.V1Pod:
    state = client.V1ContainerState(
        waiting=client.V1ContainerStateWaiting(reason=waiting[0], message=waiting[1]) if waiting else None,
        running=client.V1ContainerStateRunning() if running else None)
    statuses = [client.V1ContainerStatus(name="agent", image="img", image_id="", ready=running, restart_count=0,
                                         state=state)]
    return client.V1Pod(status=client.V1PodStatus(conditions=[client.V1PodCondition(**c) for c in conditions],
                                                  container_statuses=statuses))


def test_what_holds_a_pod_is_its_scheduling_or_its_containers_waiting_reason() -> None:
    unschedulable = _pod([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": "0/1 nodes are available: 1 node(s) didn't match node selector."}])
    assert hold(unschedulable) == ("Unschedulable", "0/1 nodes are available: 1 node(s) didn't match node selector.")
    pull = _pod([{"type": "PodScheduled", "status": "True"}], waiting=("ImagePullBackOff", 'Back-off pulling image "x"'))
    assert hold(pull) == ("ImagePullBackOff", 'container agent: Back-off pulling image "x"')
    # A start under way, and a running container, hold nothing.
    assert hold(_pod([{"type": "PodScheduled", "status": "True"}], waiting=("ContainerCreating", ""))) is None
    assert hold(_pod([{"type": "PodScheduled", "status": "True"}], running=True)) is None
    assert hold(client.V1Pod(status=None)) is None


def test_a_hold_ends_the_run_only_once_it_has_lasted_start_timeout_s() -> None:
    logged: list[dict] = []
    watch = StartWatch(timeout_s=10)

    def log(kind, **fields):
        logged.append({"kind": kind, **fields})

    watch.see("node0", ("ErrImagePull", "container agent: not found"), 100.0, log)
    watch.see("node0", ("ImagePullBackOff", "container agent: back-off"), 105.0, log)  # the same hold, another reason
    assert watch.blocked is None
    watch.see("node1", None, 109.0, log)
    watch.see("node0", ("ImagePullBackOff", "container agent: back-off"), 110.0, log)
    assert watch.blocked == ("node0's pod has not started in 10 s (target.start_timeout_s 10): ImagePullBackOff: "
                             "container agent: back-off")
    assert [(r["reason"], r["held_s"]) for r in logged] == [("ErrImagePull", 0.0), ("ImagePullBackOff", 5.0)]


def test_a_hold_that_clears_in_time_is_logged_and_forgotten() -> None:
    logged: list[dict] = []
    watch = StartWatch(timeout_s=10)
    log = lambda kind, **f: logged.append(f)  # noqa: E731
    watch.see("node0", ("Unschedulable", "cordoned"), 0.0, log)
    watch.see("node0", None, 6.0, log)  # a drain's cordon ended: the replacement runs
    watch.see("node0", ("Unschedulable", "cordoned"), 20.0, log)  # held again later: counted from then
    watch.see("node0", ("Unschedulable", "cordoned"), 29.0, log)
    assert watch.blocked is None
    assert [f["reason"] for f in logged] == ["Unschedulable", None, "Unschedulable"] and logged[1]["held_s"] == 6.0


def test_a_job_without_a_pod_is_explained_by_its_failed_create_event_when_the_run_ends() -> None:
    calls = []

    def explain():
        calls.append(1)
        return "FailedCreate", 'Job j: pods "j-x" is forbidden: exceeded quota: q'

    watch = StartWatch(timeout_s=5)
    log = lambda kind, **f: None  # noqa: E731
    watch.see("node0", ("NoPod", "Job j has no pod"), 0.0, log, explain)
    watch.see("node0", ("NoPod", "Job j has no pod"), 4.0, log, explain)
    assert calls == [] and watch.blocked is None  # the events are read once, when the hold ends the run
    watch.see("node0", ("NoPod", "Job j has no pod"), 5.0, log, explain)
    assert calls == [1] and watch.blocked.endswith('FailedCreate: Job j: pods "j-x" is forbidden: exceeded quota: q')


class _Core:
    def __init__(self, items=None, error=None):
        self.items, self.error, self.selector = items or [], error, None

    def list_namespaced_event(self, namespace, field_selector, _request_timeout):
        self.selector = field_selector
        if self.error:
            raise self.error
        return client.CoreV1EventList(items=self.items)


def test_failed_create_names_the_newest_refusal_or_why_it_could_not_read_events() -> None:
    from datetime import datetime, timezone

    def event(reason, message, minute):
        return client.CoreV1Event(metadata=client.V1ObjectMeta(), involved_object=client.V1ObjectReference(),
                                  reason=reason, message=message,
                                  last_timestamp=datetime(2026, 1, 1, 0, minute, tzinfo=timezone.utc))

    core = _Core([event("FailedCreate", "old quota", 1), event("SuccessfulCreate", "made", 3),
                  event("FailedCreate", "exceeded quota: pods=0", 2)])
    assert failed_create(core, "ns", "j", (client.ApiException,)) == ("FailedCreate", "Job j: exceeded quota: pods=0")
    assert core.selector == "involvedObject.kind=Job,involvedObject.name=j"
    assert failed_create(_Core(), "ns", "j", (client.ApiException,)) == ("NoPod", "Job j has no pod yet")
    denied = _Core(error=client.ApiException(status=403, reason="Forbidden"))
    assert failed_create(denied, "ns", "j", (client.ApiException,)) == (
        "NoPod", "Job j has no pod (the kubeconfig may not list events to say why)")


def test_an_init_container_in_a_crash_loop_holds_the_pod_the_agents_own_does_not() -> None:
    crash = client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason="CrashLoopBackOff", message="x"))
    init = client.V1ContainerStatus(name="fetch", image="i", image_id="", ready=False, restart_count=3, state=crash)
    pod = client.V1Pod(status=client.V1PodStatus(init_container_statuses=[init], container_statuses=[]))
    assert hold(pod) == ("CrashLoopBackOff", "container fetch: x")
    agent = client.V1ContainerStatus(name="agent", image="i", image_id="", ready=False, restart_count=3, state=crash)
    assert hold(client.V1Pod(status=client.V1PodStatus(container_statuses=[agent]))) is None  # a restart: judged


def test_a_drain_longer_than_the_start_timeout_is_refused_before_launch() -> None:
    from types import SimpleNamespace

    import pytest

    from chaos.errors import CapabilityError
    from chaos.targets.kubernetes import Kubernetes, KubernetesConfig

    target = Kubernetes(KubernetesConfig(start_timeout_s=60))
    with pytest.raises(CapabilityError, match="keeps its node from taking pods for 90 s.*raise start_timeout_s above the fault"):
        target.admit(SimpleNamespace(), "node-drain", SimpleNamespace(duration_s=90))
    target.admit(SimpleNamespace(), "node-drain", SimpleNamespace(duration_s=30))
