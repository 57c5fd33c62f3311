"""The goodput split of a drop-replica job (torchft replica groups) over hand-made histories whose every second is known."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.evidence.events import History
from chaos.evidence.goodput import compute_goodput
from chaos.evidence.goodput_replicas import is_replica_job
from chaos.evidence.outcome import FaultRecord


def rec(ev: str, t: float, group: int, pid: int, attempt: str = "0.0", **kw) -> dict:
    return {"ev": ev, "t": t, "mono": t, "pid": pid, "host": "h", "rank": 0, "replica_group": group,
            "attempt": attempt, **kw}


def harness(ev: str, t: float, **kw) -> dict:
    return {"ev": ev, "t": t, "mono": t, "pid": 1, "host": "h", "source": "harness", **kw}


def job(*, heal_pause: float = 0.8, whole_job_down: bool = False) -> tuple[list[dict], FaultRecord]:
    """Launch 0; both groups up at 2 (start); steps every second from 3 in lockstep (each group reports each step);
    rg1 SIGKILLed at 10.2 after step 8 (t 10); rg0's step 9 comes at 13 (the quorum waited for the lighthouse);
    rg1's new process spawns at 15, heals at 20.1 while rg0 trains; step 16 at 20 is followed by step 17 at
    20 + 1 + heal_pause; then a step a second to step 25; exit 2 s after the last step."""
    records = [harness("launch", 0.0),
               harness("worker_spawn", 0.5, worker_pid=10, node="rg0", attempt="0.0", rank=0),
               harness("worker_spawn", 0.5, worker_pid=11, node="rg1", attempt="0.0", rank=0),
               rec("start", 2.0, 0, 10), rec("start", 2.0, 1, 11)]
    t = 3.0
    for step in range(1, 9):  # steps 1-8 at 3..10, both groups
        records += [rec("step", t, 0, 10, step=step), rec("step", t + 0.01, 1, 11, step=step)]
        t += 1.0
    records.append(harness("worker_exit", 10.3, worker_pid=11, node="rg1", attempt="0.0", rank=0))
    if whole_job_down:  # rg0 dies too, and both come back: nobody was left to train on
        records.append(harness("worker_exit", 12.0, worker_pid=10, node="rg0", attempt="0.0", rank=0))
        records.append(harness("worker_spawn", 12.2, worker_pid=20, node="rg0", attempt="0.1", rank=0))
        records.append(rec("start", 12.5, 0, 20, attempt="0.1"))
    survivor = 20 if whole_job_down else 10
    t = 13.0
    for step in range(9, 17):  # steps 9-16 at 13..20, the survivor alone
        records.append(rec("step", t, 0, survivor, attempt="0.1" if whole_job_down else "0.0", step=step))
        t += 1.0
    records += [harness("worker_spawn", 15.0, worker_pid=12, node="rg1", attempt="0.1", rank=0),
                rec("start", 19.5, 1, 12, attempt="0.1"), rec("heal", 20.1, 1, 12, attempt="0.1", step=16)]
    t = 21.0 + heal_pause
    for step in range(17, 26):
        records += [rec("step", t, 0, survivor, attempt="0.1" if whole_job_down else "0.0", step=step),
                    rec("step", t + 0.02, 1, 12, attempt="0.1", step=step)]
        t += 1.0
    last = t - 1.0
    records += [rec("final", last + 0.5, 0, survivor, step=25, digest="d"), harness("exit", last + 2.0, code=0)]
    records.sort(key=lambda r: r["t"])
    return records, FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=10.2, details={"pids": [11]})


def test_the_survivors_pause_is_the_faults_detection_and_the_heal_its_load() -> None:
    records, fault = job()
    history = History(records)
    assert is_replica_job(history)
    split = compute_goodput(history, [fault])
    assert not split.problems
    # Step 9 took 3 s: 1.5 s (1.5 x the 1-s median) productive, 1.5 s the quorum waiting for the lighthouse. Step 17
    # took 1.8 s while rg1 healed from rg0: 0.3 s beyond the bound. No restart: nobody stopped the world.
    want = {"startup": 2.0, "productive": 1.0 + 7.0 + 1.5 + 7.0 + 1.5 + 8.0, "detection": 1.5, "ckpt_load": 0.3,
            "shutdown": 2.0}
    assert {k: round(v, 6) for k, v in split.seconds.items() if v} == pytest.approx(want)
    assert sum(split.seconds.values()) == pytest.approx(split.wall_s)
    assert split.by_fault == {"kill-rank#0": {"detection": pytest.approx(1.5), "ckpt_load": pytest.approx(0.3)}}
    assert split.median_step_s == pytest.approx(1.0)


def test_a_step_every_group_reports_counts_once() -> None:
    records, fault = job()
    one_group = [r for r in records if not (r["ev"] == "step" and r["replica_group"] == 1)]
    both, alone = compute_goodput(History(records), [fault]), compute_goodput(History(one_group), [fault])
    assert both.seconds["productive"] == pytest.approx(alone.seconds["productive"])


def test_a_pause_with_no_fault_near_it_is_slow_not_charged() -> None:
    records, fault = job(heal_pause=0.0)
    split = compute_goodput(History(records), [])
    assert split.by_fault == {} and split.seconds["slow"] == pytest.approx(1.5)
    assert split.seconds["detection"] == 0.0


def test_a_job_that_lost_every_group_restarted_the_world() -> None:
    records, fault = job(whole_job_down=True)
    split = compute_goodput(History(records), [fault])
    # Step 9 was due by 11.5 (1.5 x the 1-s median after step 8 at 10); rg0 too left at 12.0, and from then to
    # step 9 at 13 (a new process's start-up) the job was restarting, not waiting: both charged to the fault.
    assert split.by_fault["kill-rank#0"] == {"detection": pytest.approx(0.5), "restart": pytest.approx(1.0),
                                             "ckpt_load": pytest.approx(0.3)}
    assert sum(split.seconds.values()) == pytest.approx(split.wall_s)


def test_a_job_of_one_world_is_not_split_as_replica_groups() -> None:
    records, _ = job()
    plain = [{k: v for k, v in r.items() if k not in ("replica_group", "node")} for r in records]
    assert not is_replica_job(History(plain))


# Lies and odd histories an adversarial review built (each once made the split wrong); the truth is job() above.

def _split(records: list[dict], faults: list[FaultRecord]) -> Any:
    split = compute_goodput(History(records), faults)
    assert sum(split.seconds.values()) == pytest.approx(split.wall_s), "the parts must add up to the wall time"
    return split


def test_a_short_run_that_stopped_the_world_is_not_productive() -> None:
    """Fewer steps than a median needs: the 56-s outage of every group is a restart, not 'productive'."""
    records = [harness("launch", 0.0), harness("worker_spawn", 0.5, worker_pid=10, node="rg0"),
               harness("worker_spawn", 0.5, worker_pid=11, node="rg1"), rec("start", 1.0, 0, 10), rec("start", 1.0, 1, 11),
               rec("step", 2.0, 0, 10, step=1), rec("step", 3.0, 0, 10, step=2),
               harness("worker_exit", 3.5, worker_pid=10, node="rg0"), harness("worker_exit", 3.5, worker_pid=11, node="rg1"),
               harness("worker_spawn", 60.0, worker_pid=20, node="rg0"), rec("step", 63.0, 0, 20, step=3),
               rec("step", 64.0, 0, 20, step=4), rec("final", 64.5, 0, 20, step=4), harness("exit", 65.0, code=0)]
    split = _split(records, [FaultRecord(index=0, kind="replica-down", label="rd#0", t_inject=3.4)])
    assert split.by_fault == {"rd#0": {"detection": pytest.approx(0.1), "restart": pytest.approx(59.5)}}
    assert split.goodput == pytest.approx(3.4 / 65)  # steps 1, 2, 4 and 0.4 s of step 3 before the fault


def test_records_outside_launch_and_exit_count_for_nothing() -> None:
    stale = [rec("step", -100.0 + i, 0, 10, step=i + 1) for i in range(100)]  # an older run's steps, same pid
    records = stale + [harness("launch", 0.0), harness("worker_spawn", 1.0, worker_pid=10, node="rg0"),
                       rec("start", 2.0, 0, 10), harness("exit", 50.0, code=1), rec("step", 55.0, 0, 10, step=101)]
    split = _split(records, [])
    assert split.seconds["productive"] == 0.0 and split.problems


def test_every_group_gone_inside_the_step_is_a_restart_from_then() -> None:
    records, fault = job(whole_job_down=True)
    records = [dict(r, t=10.4) if r.get("ev") == "worker_exit" and r.get("worker_pid") == 10 else r for r in records]
    split = _split(sorted(records, key=lambda r: r["t"]), [fault])
    # Step 8 at 10; rg1 killed at 10.2 (the fault), rg0 gone at 10.4: 0.4 s of step, then a restart to step 9 at 13.
    assert split.by_fault["kill-rank#0"]["restart"] == pytest.approx(2.6)
    assert "detection" not in split.by_fault["kill-rank#0"]


def test_a_stop_of_the_world_with_no_fault_is_still_a_restart_and_an_old_fault_is_not_charged() -> None:
    records, fault = job()
    cut = 23.9  # both groups' processes exit long after the fault and its recovery; they come back 10 s later
    kept = [r for r in records if not (r["ev"] in ("step", "final", "exit") and r["t"] > cut)]
    moved = [dict(r, t=r["t"] + 10.0) for r in records if r["ev"] in ("step", "final", "exit") and r["t"] > cut]
    extra = [harness("worker_exit", cut, worker_pid=10, node="rg0"), harness("worker_exit", cut, worker_pid=12, node="rg1"),
             harness("worker_spawn", cut + 0.6, worker_pid=10, node="rg0"),
             harness("worker_spawn", cut + 0.6, worker_pid=12, node="rg1")]
    split = _split(sorted(kept + extra + moved, key=lambda r: r["t"]), [fault])
    assert split.seconds["restart"] > 9.0
    assert "restart" not in split.by_fault.get("kill-rank#0", {}), split.by_fault


def test_the_first_fault_of_a_pause_owns_it_not_one_that_came_later() -> None:
    records, fault = job()
    later = FaultRecord(index=1, kind="network-degrade", label="network-degrade#1", t_inject=12.9)
    split = _split(records, [fault, later])
    assert split.by_fault["kill-rank#0"]["detection"] == pytest.approx(1.5)
    assert "network-degrade#1" not in split.by_fault


def test_without_the_harness_view_of_the_workers_no_restart_is_claimed() -> None:
    records, fault = job()
    workload_only = [r for r in records if r["ev"] not in ("worker_spawn", "worker_exit")]
    split = _split(workload_only, [fault])
    assert split.by_fault == {"kill-rank#0": {"detection": pytest.approx(1.5), "ckpt_load": pytest.approx(0.3)}}


def test_steps_from_a_process_the_harness_never_saw_count_for_nothing() -> None:
    records, fault = job()
    forged = [rec("step", 11.0 + k, 0, 999, step=9 + k) for k in range(2)]  # a stranger fills the survivors' pause
    split = _split(sorted(records + forged, key=lambda r: r["t"]), [fault])
    assert split.by_fault["kill-rank#0"]["detection"] == pytest.approx(1.5)


def test_a_job_whose_harness_saw_no_replica_group_is_not_split_as_one_whatever_its_steps_say() -> None:
    records, _ = job()
    plain = [dict(r, node="node0") if r["ev"] == "worker_spawn" else r for r in records]  # steps keep replica_group
    assert not is_replica_job(History(plain))


def test_a_group_that_trains_on_alone_after_the_quorum_finished_redid_work() -> None:
    """The late joiner: the quorum finished at step 25; rg1 came back with no live peer and trained steps 1-5 again
    from its own weights. That time is recompute (charged to the fault that took rg1 down), not shutdown."""
    records, fault = job()
    last = max(r["t"] for r in records if r["ev"] == "step")
    body = [r for r in records if r["ev"] not in ("final", "exit")]
    again = [rec("step", last + k, 1, 12, attempt="0.1", step=k) for k in range(1, 6)]
    records = body + again + [rec("final", last + 5.5, 1, 12, attempt="0.1", step=5, digest="e"),
                              harness("exit", last + 6.0, code=0)]
    split = _split(records, [fault])
    assert split.by_fault["kill-rank#0"]["recompute"] == pytest.approx(5.0, abs=0.05)
    assert split.seconds["shutdown"] == pytest.approx(1.0)
