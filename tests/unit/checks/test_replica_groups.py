"""survivor_progress and replicas_converge on a simulated torchft job: the truth passes, each lie is refused.

The job: two replica groups (nodes rg0, rg1), one process each, committing a step every 0.1 s with the same
weight checksum per step. At step 15 rg1's process is killed; rg0 pauses ``pause`` s (the lighthouse's
heartbeat timeout) and trains on alone; rg1's restarted process is up ``up`` s after the kill, heals from
rg0 and commits the steps after it with rg0's checksums. Each lie breaks exactly one promise."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from histsim import make_outcome

from chaos.checks.base import FaultRecord
from chaos.evidence.events import History
from chaos.registry import CHECKS

KILL_T = 2000.0


def digest(step: int) -> str:
    return f"{step * 7919:016x}"


def job(steps: int = 60, kill_at: int = 15, pause: float = 2.0, up: float = 5.0, heal: bool = True,
        late: bool = False) -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """(records, faults) of the truth; ``late``: rg1 comes back after rg0 finished and trains alone from step 1."""
    recs: list[dict[str, Any]] = []

    def rank(ev: str, t: float, pid: int, group: int, **fields: Any) -> None:
        recs.append({"ev": ev, "t": t, "mono": t, "pid": pid, "host": "h", "rank": 0, "world_size": 1,
                     "attempt": "0.0" if pid != 302 else "0.1", "replica_group": group, **fields})

    def harness(ev: str, t: float, **fields: Any) -> None:
        recs.append({"ev": ev, "t": t, "mono": t, "pid": 1, "host": "h", "source": "harness", **fields})

    t0 = KILL_T - kill_at * 0.1 - 1.0
    for pid, group in ((100, 0), (201, 1)):
        harness("worker_spawn", t0, worker_pid=pid, rank=0, node=f"rg{group}", attempt="0.0", generation=1)
        rank("start", t0 + 0.5, pid, group, local_rank=0, device="cpu", dataset_size=256)
    for s in range(1, kill_at + 1):
        t = t0 + 1.0 + s * 0.1 - 0.05
        for pid, group in ((100, 0), (201, 1)):
            rank("step", t, pid, group, step=s, epoch=0, samples=[], loss=1.0, participants=2, digest=digest(s))
    harness("worker_exit", KILL_T + 0.01, worker_pid=201, rank=0, node="rg1", attempt="0.0")
    t = KILL_T + pause
    for s in range(kill_at + 1, steps + 1):
        rank("step", t, 100, 0, step=s, epoch=0, samples=[], loss=1.0, participants=1, digest=digest(s))
        t += 0.1
    rank("final", t, 100, 0, step=steps, digest="f" * 64)
    end = t
    back = end + 1.0 if late else KILL_T + up
    harness("worker_spawn", back - 0.5, worker_pid=302, rank=0, node="rg1", attempt="0.1", generation=2)
    rank("start", back, 302, 1, local_rank=0, device="cpu", dataset_size=256)
    if late:
        for s in range(1, steps + 1):
            rank("step", back + s * 0.1, 302, 1, step=s, epoch=0, samples=[], loss=1.0, participants=1,
                 digest=f"{s:016x}")
        rank("final", back + steps * 0.1 + 0.1, 302, 1, step=steps, digest="e" * 64)
    else:
        joined = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["t"] > back + 0.2)
        if heal:
            rank("heal", back + 0.15, 302, 1, step=joined["step"] - 1, participants=2)
        for r in [r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] >= joined["step"]]:
            rank("step", r["t"] + 0.001, 302, 1, step=r["step"], epoch=0, samples=[], loss=1.0, participants=2,
                 digest=r["digest"])
        rank("final", end + 0.001, 302, 1, step=steps, digest="f" * 64)
    recs.sort(key=lambda r: r["t"])
    fault = FaultRecord(0, "kill-rank", "kill-rank#0", KILL_T, details={"pids": [201], "ranks": [0], "node": "rg1"},
                        t_revert=KILL_T)
    return recs, [fault]


def verdict(kind: str, records: list[dict[str, Any]], faults: list[FaultRecord], **config: Any) -> Any:
    check = CHECKS.get(kind)(CHECKS.get(kind).Config.model_validate(config))
    return check.evaluate(make_outcome(History([dict(r) for r in records]), faults=copy.deepcopy(faults)))


@pytest.mark.parametrize("kind", ["survivor_progress", "replicas_converge"])
def test_the_truth_passes(kind: str) -> None:
    recs, faults = job()
    result = verdict(kind, recs, faults, **({"max_stall_s": 3} if kind == "survivor_progress" else {}))
    assert result.verdict == "pass", result.reason


def test_the_survivor_s_pause_is_measured_from_the_kill() -> None:
    result = verdict("survivor_progress", *job(pause=2.0), max_stall_s=3)
    assert result.figures["kill-rank#0"]["max_stall_s"] == pytest.approx(2.0, abs=0.01), result.figures
    assert "rg0 (pid 100)" in result.figures["kill-rank#0"]["survivors"]


def test_a_survivor_that_stalled_past_the_bound_fails() -> None:
    result = verdict("survivor_progress", *job(pause=9.0), max_stall_s=3)
    assert result.verdict == "fail" and "went 9.00 s without committing a step" in result.reason, result.reason


def test_a_survivor_that_stopped_fails() -> None:
    recs, faults = job()
    cut = [r for r in recs if not (r["pid"] == 100 and r["ev"] in ("step", "final") and r["t"] > KILL_T + 3)]
    cut.append({"ev": "worker_exit", "t": KILL_T + 3.05, "mono": KILL_T + 3.05, "pid": 1, "host": "h",
                "source": "harness", "worker_pid": 100, "rank": 0, "node": "rg0", "attempt": "0.0"})
    result = verdict("survivor_progress", cut, faults, max_stall_s=3)
    assert result.verdict == "fail" and "never finished" in result.reason, result.reason


def test_a_survivor_whose_final_claims_the_end_early_fails() -> None:
    recs, faults = job()
    forged = [r for r in recs if not (r["pid"] == 100 and r["ev"] in ("step", "final") and r["t"] > KILL_T + 3)]
    forged.append({**next(r for r in recs if r["pid"] == 100 and r["ev"] == "final"), "t": KILL_T + 3.05, "step": 25})
    result = verdict("survivor_progress", forged, faults, max_stall_s=3)
    assert result.verdict == "fail" and "short of step 60" in result.reason, result.reason


def test_a_process_that_claims_another_group_is_a_contradiction() -> None:
    recs, faults = job()
    for r in recs:
        if r["pid"] == 100 and r["ev"] == "step" and r["step"] == 30:
            r["replica_group"] = 1
    for kind in ("survivor_progress", "replicas_converge"):
        result = verdict(kind, recs, faults)
        assert result.verdict == "fail" and "reports step as replica group 1" in result.reason, result.reason


def test_no_replica_groups_and_no_struck_group_prove_nothing() -> None:
    recs, faults = job()
    plain = [{k: v for k, v in r.items() if k != "replica_group"} for r in recs
             if r.get("ev") not in ("worker_spawn", "worker_exit")]
    for kind in ("survivor_progress", "replicas_converge"):
        assert verdict(kind, plain, faults).verdict == "inconclusive"
    assert verdict("survivor_progress", recs, []).verdict == "inconclusive"


def test_a_heal_that_brought_other_weights_fails() -> None:
    recs, faults = job()
    for r in recs:
        if r["pid"] == 302 and r["ev"] == "step":
            r["digest"] = "0" * 15 + "1"
    result = verdict("replicas_converge", recs, faults)
    assert result.verdict == "fail" and "weights differ" in result.reason, result.reason


def test_a_rejoin_without_a_heal_fails() -> None:
    result = verdict("replicas_converge", *job(heal=False))
    assert result.verdict == "fail" and "without healing from a peer" in result.reason, result.reason


def test_a_late_joiner_that_trains_alone_from_scratch_fails() -> None:
    result = verdict("replicas_converge", *job(late=True))
    assert result.verdict == "fail" and "committed step 1 without healing" in result.reason, result.reason


def test_steps_without_digests_or_without_a_shared_step_are_inconclusive() -> None:
    recs, faults = job()
    bare = [{k: v for k, v in r.items() if not (k == "digest" and r["ev"] == "step")} for r in recs]
    assert verdict("replicas_converge", bare, faults).verdict == "inconclusive"
    alone = [r for r in recs if not (r.get("pid") in (201, 302) or r.get("worker_pid") in (201, 302))]
    result = verdict("replicas_converge", alone, faults)
    assert result.verdict == "inconclusive" and "never compared" in result.reason, result.reason


def test_the_rejoin_time_comes_in_two_parts() -> None:
    result = verdict("replicas_converge", *job(up=5.0))
    rejoin = result.figures["rejoins"]["rg1 (pid 302)"]
    assert rejoin["up_s"] == pytest.approx(5.0) and rejoin["heal_s"] == pytest.approx(0.15), rejoin
