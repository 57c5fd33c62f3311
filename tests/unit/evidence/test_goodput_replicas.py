"""The goodput split of a drop-replica job (torchft replica groups) over hand-made histories whose every second is known."""

from __future__ import annotations

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
