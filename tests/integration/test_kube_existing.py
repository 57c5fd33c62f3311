"""``cluster: existing`` against a real Kubernetes the run does not own.

A local cluster (chaos/kube/minicluster.py, started by this module, not by the run) stands in for a user's: the
harness gets only a kubeconfig, a namespace that already holds someone else's Job, and a pod template of the
user's; it must ask for its permissions first, create nothing but its own Jobs, reach the ranks through the API
(exec) only, and leave the other Job, its pod and the node as they were.
"""

from __future__ import annotations

import base64
import json
import random
import re
import secrets
import sys
import time
from pathlib import Path

import pytest
import yaml

from chaos.errors import CapabilityError
from chaos.kube.build import refusal
from chaos.pytest_plugin import HOST_KUBERNETES
from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell

ROOT = Path(__file__).resolve().parents[2]
WHY = refusal()
pytestmark = [pytest.mark.xdist_group(HOST_KUBERNETES), pytest.mark.integration, pytest.mark.root, pytest.mark.docker,
              pytest.mark.skipif(WHY is not None, reason=f"{WHY}")]
OTHER = "someone-else"


def _binds(shared: Path) -> dict[str, tuple[str, bool]]:
    from chaos.runtime.hostimage import host_binds

    binds = {src: (b["bind"], b["mode"] == "ro") for src, b in host_binds().items()}
    binds.update({str(ROOT): (str(ROOT), True), str(shared): (str(shared), False)})
    return binds


def _pod(image: str, shared: Path, name: str, command: list[str] | None = None) -> dict:
    """A user's pod: the host's userland (so torch is there), the repository and the shared directory."""
    items = sorted(_binds(shared).items())
    container = {"name": name, "image": image, "imagePullPolicy": "Never", "workingDir": str(shared),
                 "env": [{"name": "USERS_OWN", "value": "kept"}],
                 "volumeMounts": [{"name": f"v{i}", "mountPath": dst, "readOnly": ro}
                                  for i, (_, (dst, ro)) in enumerate(items)]}
    if command:
        container["command"] = command
    # hostNetwork: the local cluster has no pod network. hostPID too: torchrun names a rendezvous participant by
    # its address and pid, and two hostNetwork pods on one node (one address) with pid namespaces of their own
    # both start their agent as pid 9: the rendezvous takes them for one node and waits forever.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"team": "users"}},
            "spec": {"hostNetwork": True, "hostPID": True, "automountServiceAccountToken": False,
                     "containers": [container],
                     "volumes": [{"name": f"v{i}", "hostPath": {"path": src}} for i, (src, _) in enumerate(items)]}}


@pytest.fixture(scope="module")
def users(tmp_path_factory):
    """The stand-in cluster with someone else's Job running in the namespace, and a kubeconfig whose user may run
    Jobs but not delete pods. Yields a dict of what the tests need."""
    import docker
    from kubernetes import client

    from chaos.kube.minicluster import KubeCluster
    from chaos.runtime.hostimage import ensure_host_image

    root = tmp_path_factory.mktemp("users")
    log = HarnessLog(root / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=root, ckpt_dir=root / "ckpt", ledger=Ledger(root),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    run.ledger.open(dirs=[root])
    kube = KubeCluster(run, root / "kube", namespace=f"users-{secrets.token_hex(3)}")
    try:
        kube.start()
        dc = docker.from_env()
        image, _ = ensure_host_image(dc)
        dc.close()
        ns = kube.namespace
        other = _pod(image, root, "sleeper", ["sleep", "600"])
        client.BatchV1Api(kube.api).create_namespaced_job(ns, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": OTHER, "labels": {"app": OTHER}},
            "spec": {"template": {"metadata": {"labels": {"app": OTHER}},
                                  "spec": {**other["spec"], "restartPolicy": "Never"}}}})
        limited = _limited_kubeconfig(kube, root)
        core = kube.core()
        deadline = time.monotonic() + 60
        while not [p for p in core.list_namespaced_pod(ns, label_selector=f"app={OTHER}").items
                   if p.status.phase == "Running"]:
            assert time.monotonic() < deadline, "someone else's pod never ran"
            time.sleep(0.5)
        yield {"kube": kube, "image": image, "limited": limited}
    finally:
        failures = run.ledger.revert(run.shell)
        kube.release_lock()
        assert not failures, failures


def _limited_kubeconfig(kube, root: Path) -> Path:
    """A service account that may run Jobs and exec, but not delete pods or touch nodes."""
    from kubernetes import client

    ns, rbac, core = kube.namespace, client.RbacAuthorizationV1Api(kube.api), kube.core()
    core.create_namespaced_service_account(ns, {"metadata": {"name": "limited"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "limited"}, "rules": [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}]})
    rbac.create_namespaced_role_binding(ns, {
        "metadata": {"name": "limited"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "limited"},
        "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": ns}]})
    deadline = time.monotonic() + 30
    while True:  # the token controller writes the account's token secret
        secrets_ = core.read_namespaced_service_account("limited", ns).secrets or []
        if secrets_:
            break
        assert time.monotonic() < deadline, "no token for the service account"
        time.sleep(0.3)
    token = base64.b64decode(core.read_namespaced_secret(secrets_[0].name, ns).data["token"]).decode()
    doc = yaml.safe_load(kube.kubeconfig.read_text())
    doc["users"] = [{"name": "limited", "user": {"token": token}}]
    doc["contexts"][0]["context"]["user"] = "limited"
    path = root / "limited.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _experiment(tmp: Path, users: dict, faults: list[dict], checks: list[dict], **target) -> Path:
    from chaos.kube.minicluster import free_port

    template = tmp / "pod.yaml"
    template.write_text(yaml.safe_dump(_pod(users["image"], tmp, "trainer")))
    doc = {
        "name": "kube-existing",
        "workload": {"script": str(ROOT / "workloads" / "ddp.py"), "nproc_per_node": 1, "max_restarts": 3,
                     "args": {"steps": 40, "ckpt_every": 10, "seed": 0, "pg_timeout_s": 20}},
        "target": {"kind": "kubernetes", "cluster": "existing", "kubeconfig": str(users["kube"].kubeconfig),
                   "namespace": users["kube"].namespace, "pod_template": str(template), "shared_dir": str(tmp),
                   "rdzv_host": "127.0.0.1", "rdzv_port": free_port(), "python": sys.executable, "nodes": 2,
                   "backoff_limit": 3, "grace_s": 10, **target},
        "faults": faults, "checks": checks, "timeout_s": 240, "seed": 0,
    }
    path = tmp / "existing.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(path: Path, tmp: Path):
    from chaos.run.runner import Runner
    from chaos.spec.load import load_experiment

    return Runner(load_experiment(path), runs_root=tmp / "runs", golden=None).run()


def _others(users: dict) -> list[tuple[str, str, int, str]]:
    """Someone else's pods: name, uid, restarts, phase; and the node's cordon."""
    pods = users["kube"].core().list_namespaced_pod(users["kube"].namespace, label_selector=f"app={OTHER}").items
    return [(p.metadata.name, p.metadata.uid, p.status.container_statuses[0].restart_count, p.status.phase)
            for p in pods]


def _ours(users: dict) -> list[str]:
    from kubernetes import client

    kube = users["kube"]
    jobs = client.BatchV1Api(kube.api).list_namespaced_job(kube.namespace).items
    pods = kube.core().list_namespaced_pod(kube.namespace).items
    return ([j.metadata.name for j in jobs if j.metadata.name != OTHER]
            + [p.metadata.name for p in pods if (p.metadata.labels or {}).get("app") != OTHER])


def _verdicts(report) -> dict[str, str]:
    return {r.kind: r.verdict for r in report.checks}


# Not no_orphans: it also lists this host's docker, where the stand-in's kubelet keeps a deleted pod's exited
# containers until its next garbage collection (every minute); on a cluster of the user's they are not on this
# host. What the run created there is asserted instead: no Job or pod of it left, nothing left in its ledger.
CHECKS = [{"completes": {"min_restarts": 1}}, {"exactly_once": {}}, {"checkpoint_integrity": {}},
          {"kube_recovered": {"max_s": 60}}]


def _nothing_left(users: dict, report) -> None:
    from chaos.runtime.ledger import Ledger
    from chaos.runtime.shell import Shell

    assert _ours(users) == []
    assert Ledger(report.run_dir).leftovers(Shell()) == []


def test_rank_faults_by_exec_and_a_pod_delete_on_a_cluster_of_the_users(users, tmp_path: Path) -> None:
    before = _others(users)
    faults = [{"kind": "kill-rank", "rank": 1, "trigger": {"at_step": 8}},
              {"kind": "pod-delete", "node": 1, "trigger": {"at_step": 22}}]
    report = _run(_experiment(tmp_path, users, faults, CHECKS, restart_policy="Never"), tmp_path)
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    assert report.exit_code == 0 and set(_verdicts(report).values()) == {"pass"}, detail
    kill, delete = json.loads((report.run_dir / "journal.json").read_text())["faults"]
    assert kill["error"] is None and len(kill["details"]["pids"]) == 1, kill
    assert delete["error"] is None and delete["recovery"]["resume_s"] is not None, delete
    harness = [json.loads(line) for line in (report.run_dir / "harness.jsonl").read_text().splitlines()]
    # No process tree of the pods: every container record came from the API, without a host pid.
    seen = [r for r in harness if r["ev"] == "kube_container"]
    assert seen and all(r["pid"] is None for r in seen), seen
    # The user's pod was kept (its container, its own variable), with the protocol's variables added.
    launches = [r for r in harness if r["ev"] == "node_launch"]
    assert [r["container"] for r in launches] == ["trainer", "trainer"], launches
    assert all({"USERS_OWN", "CHAOS_RUN_DIR", "CHAOS_POD_IP"} <= set(r["env"]) for r in launches), launches
    assert not any("HOME" in r["env"] or "PATH" in r["env"] for r in launches)  # not this host's environment
    assert _others(users) == before
    _nothing_left(users, report)


def test_a_hang_a_container_kill_and_a_drain_leave_the_rest_of_the_cluster_alone(users, tmp_path: Path) -> None:
    before = _others(users)
    faults = [{"kind": "hang-rank", "rank": 0, "duration_s": 2, "trigger": {"at_step": 5}},
              {"kind": "container-kill", "node": 1, "trigger": {"at_step": 14}},
              {"kind": "node-drain", "node": 1, "duration_s": 6, "trigger": {"at_step": 28}}]
    report = _run(_experiment(tmp_path, users, faults, CHECKS, restart_policy="OnFailure"), tmp_path)
    detail = "\n".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    assert report.exit_code == 0 and set(_verdicts(report).values()) == {"pass"}, detail
    hang, kill, drain = json.loads((report.run_dir / "journal.json").read_text())["faults"]
    assert hang["error"] is None and hang["revert_errors"] == [], hang
    assert kill["error"] is None and drain["error"] is None, (kill, drain)
    kube = [r for r in report.checks if r.kind == "kube_recovered"][0]
    assert "restarted in place" in kube.reason, kube.reason  # OnFailure: the killed container came back in its pod
    # The drain evicted the run's pods only: someone else's pod ran on, and the node is schedulable again.
    assert _others(users) == before
    _nothing_left(users, report)
    assert not users["kube"].core().read_node(users["kube"].node).spec.unschedulable


def test_a_job_whose_backoff_limit_is_used_up_fails_the_run_and_says_so(users, tmp_path: Path) -> None:
    """The Job's own policy judged: backoffLimit 0 and a killed container under Never: the Job controller gives
    up, the run fails at once (no node waits in the rendezvous for it) and kube_recovered names why."""
    faults = [{"kind": "container-kill", "node": 1, "trigger": {"at_step": 12}}]
    report = _run(_experiment(tmp_path, users, faults, [{"kube_recovered": {"max_s": 60}}, {"completes": {}}],
                              restart_policy="Never", backoff_limit=0), tmp_path)
    verdicts = {r.kind: r for r in report.checks}
    assert report.exit_code == 1, {k: (r.verdict, r.reason) for k, r in verdicts.items()}
    kube = verdicts["kube_recovered"]
    assert kube.verdict == "fail" and "its Job gave up (BackoffLimitExceeded: 1 failed pod(s), backoffLimit 0)" \
        in kube.reason, kube.reason
    assert verdicts["completes"].verdict == "fail", verdicts["completes"].reason
    exit_ = [json.loads(line) for line in (report.run_dir / "harness.jsonl").read_text().splitlines()]
    wall = next(r["wall_s"] for r in exit_ if r["ev"] == "exit")
    assert wall < 120, f"the run waited {wall} s after its Job gave up"
    _nothing_left(users, report)


def test_pods_that_cannot_start_end_the_run_naming_why(users, tmp_path: Path) -> None:
    """An image that is not there, a pod no node may take, and a pod the namespace's quota refuses: each ends the
    run after start_timeout_s with the cluster's own words, instead of waiting out timeout_s."""
    from kubernetes import client

    kube, ns = users["kube"], users["kube"].namespace
    cases = [({"image": "chaos-no-such-image:0"}, None, r"node\d's pod has not started in \d+ s "
              r"\(target.start_timeout_s 3\): ErrImageNeverPull: container trainer: .*chaos-no-such-image:0"),
             ({"nodeSelector": {"chaos/no-such-label": "x"}}, None, r"Unschedulable: 0/1 nodes are available"),
             ({}, {"pods": "1"}, r"FailedCreate: Job \S+: .*forbidden: .*quota")]
    for i, (change, quota, why) in enumerate(cases):
        tmp = tmp_path / str(i)
        tmp.mkdir()
        exp = _experiment(tmp, users, [], [{"completes": {}}], start_timeout_s=3)
        template = yaml.safe_load((tmp / "pod.yaml").read_text())
        spec = template["spec"]
        if "image" in change:
            spec["containers"][0]["image"] = change["image"]
        spec.update({k: v for k, v in change.items() if k != "image"})
        (tmp / "pod.yaml").write_text(yaml.safe_dump(template))
        if quota:  # someone else's pod already uses the namespace's one pod
            client.CoreV1Api(kube.api).create_namespaced_resource_quota(ns, {"metadata": {"name": "one-pod"},
                                                                             "spec": {"hard": quota}})
        try:
            t0 = time.monotonic()
            report = _run(exp, tmp)
            wall = time.monotonic() - t0
        finally:
            if quota:
                client.CoreV1Api(kube.api).delete_namespaced_resource_quota("one-pod", ns)
        verdicts = {r.kind: r for r in report.checks}
        assert verdicts["completes"].verdict == "fail", verdicts["completes"].reason
        assert any(re.search(why, d) for d in report.outcome.diagnostics), (why, report.outcome.diagnostics)
        assert wall < 90, f"case {i}: the run took {wall:.0f} s for a pod that could not start"
        harness = [json.loads(line) for line in (report.run_dir / "harness.jsonl").read_text().splitlines()]
        assert any(r["ev"] == "kube_pod_start" and r["reason"] for r in harness)
        assert any(r["ev"] == "blocked" for r in harness)
        _nothing_left(users, report)


REFUSED = [
    ({"kind": "pod-delete", "node": 1}, "limited", "may not delete pods"),
    ({"kind": "node-drain", "node": 1}, "limited", "may not get nodes (cluster-wide); patch nodes (cluster-wide)"),
    ({"kind": "straggler", "rank": 0, "duration_s": 2}, "admin", "acts on this host"),
    (None, {"namespace": "nowhere"}, "namespace nowhere does not exist"),
    (None, {"shared_dir": "shared"}, "not inside target.shared_dir"),
]


def test_what_the_run_may_not_do_is_refused_before_anything_is_created(users, tmp_path: Path) -> None:
    """One test for the five (each needs the cluster, and a test of its own would bring up one of its own)."""
    for i, (fault, how, needs) in enumerate(REFUSED):
        tmp = tmp_path / str(i)
        tmp.mkdir()
        target = {"kubeconfig": str(users["limited"] if how == "limited" else users["kube"].kubeconfig)}
        if isinstance(how, dict):
            target.update(how)
            if "shared_dir" in how:
                (tmp / how["shared_dir"]).mkdir()
                target["shared_dir"] = str(tmp / how["shared_dir"])
        faults = [{**fault, "trigger": {"at_step": 5}}] if fault else []
        with pytest.raises(CapabilityError, match=re.escape(needs)):
            _run(_experiment(tmp, users, faults, [{"completes": {}}], **target), tmp)
        assert _ours(users) == [], needs


def test_a_harness_killed_mid_run_leaves_its_jobs_to_chaos_cleanup(users, tmp_path: Path) -> None:
    """SIGKILL of the harness while a rank is held stopped on the user's cluster: its Jobs run on and the rank stays
    stopped; ``chaos cleanup`` resumes the rank (an exec) and deletes the Jobs, and nothing of the run is left."""
    import os
    import signal
    import subprocess

    from chaos.runtime.ledger import Ledger
    from chaos.runtime.shell import Shell

    exp = _experiment(tmp_path, users, [{"kind": "hang-rank", "rank": 1, "trigger": {"at_step": 5}}], [])
    doc = yaml.safe_load(exp.read_text())
    doc["workload"]["args"]["steps"] = 2000
    exp.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {**os.environ, "CHAOS_STATE_DIR": str(tmp_path / "state")}
    with open(tmp_path / "harness.out", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", str(exp), "--runs-dir", str(tmp_path / "runs")],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            logs = list((tmp_path / "runs").glob("*/harness.jsonl"))
            if logs and '"fault_inject"' in logs[0].read_text():
                break
            assert proc.poll() is None, (tmp_path / "harness.out").read_text()[-2000:]
            assert time.monotonic() < deadline, "the hang was never injected"
            time.sleep(0.3)
        run_dir = logs[0].parent
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _ours(users), "the run's Jobs went with the harness: nothing was left for cleanup to prove"
        left = [what for _, what in Ledger(run_dir).leftovers(Shell())]
        assert any("jobs-left" in w for w in left) and any("running" in w for w in left), left
        res = subprocess.run([sys.executable, "-m", "chaos", "cleanup", str(run_dir)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
        assert _ours(users) == [] and Ledger(run_dir).leftovers(Shell()) == []
        # The stopped rank was resumed through the user's API (an exec of the step module), then the Jobs deleted.
        assert "chaos.kube.ctl exec" in res.stdout and "SIGCONT" in res.stdout and "delete-jobs" in res.stdout, \
            res.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
