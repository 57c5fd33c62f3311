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


DATASET, BATCH = 32, 4
"""Two groups of 4 samples per step over 32 samples: an epoch every 4 steps."""


def digest(step: int) -> str:
    return f"{step * 7919:016x}"


def samples_of(step: int, group: int) -> tuple[int, list[int]]:
    """(epoch, indices) group ``group`` trains in ``step``: its part of the step's slice of a seeded permutation."""
    first = (step - 1) * BATCH * 2 + group * BATCH
    epoch = first // DATASET
    perm = list(range(DATASET))
    import random

    random.Random(epoch).shuffle(perm)
    return epoch, perm[first % DATASET:first % DATASET + BATCH]


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
        rank("start", t0 + 0.5, pid, group, local_rank=0, device="cpu", dataset_size=DATASET, num_replica_groups=2)
    for s in range(1, kill_at + 1):
        t = t0 + 1.0 + s * 0.1 - 0.05
        for pid, group in ((100, 0), (201, 1)):
            e, take = samples_of(s, group)
            rank("step", t, pid, group, step=s, epoch=e, samples=take, loss=1.0, participants=2, digest=digest(s))
    harness("worker_exit", KILL_T + 0.01, worker_pid=201, rank=0, node="rg1", attempt="0.0")
    t = KILL_T + pause
    for s in range(kill_at + 1, steps + 1):
        e, take = samples_of(s, 0)
        rank("step", t, 100, 0, step=s, epoch=e, samples=take, loss=1.0, participants=1, digest=digest(s))
        t += 0.1
    rank("final", t, 100, 0, step=steps, digest="f" * 64)
    end = t
    back = end + 1.0 if late else KILL_T + up
    harness("worker_spawn", back - 0.5, worker_pid=302, rank=0, node="rg1", attempt="0.1", generation=2)
    rank("start", back, 302, 1, local_rank=0, device="cpu", dataset_size=DATASET, num_replica_groups=2)
    if late:
        for s in range(1, steps + 1):
            e, take = samples_of(s, 0)
            rank("step", back + s * 0.1, 302, 1, step=s, epoch=e, samples=take, loss=1.0, participants=1,
                 digest=f"{s:016x}")
        rank("final", back + steps * 0.1 + 0.1, 302, 1, step=steps, digest="e" * 64)
    else:
        joined = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["t"] > back + 0.2)
        if heal:
            rank("heal", back + 0.15, 302, 1, step=joined["step"] - 1, participants=2)
        for r in [r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] >= joined["step"]]:
            e, take = samples_of(r["step"], 1)
            rank("step", r["t"] + 0.001, 302, 1, step=r["step"], epoch=e, samples=take, loss=1.0, participants=2,
                 digest=r["digest"])
        rank("final", end + 0.001, 302, 1, step=steps, digest="f" * 64)
    recs.sort(key=lambda r: r["t"])
    fault = FaultRecord(0, "kill-rank", "kill-rank#0", KILL_T, details={"pids": [201], "ranks": [0], "node": "rg1"},
                        t_revert=KILL_T)
    return recs, [fault]


def verdict(kind: str, records: list[dict[str, Any]], faults: list[FaultRecord], **config: Any) -> Any:
    check = CHECKS.get(kind)(CHECKS.get(kind).Config.model_validate(config))
    return check.evaluate(make_outcome(History([dict(r) for r in records]), faults=copy.deepcopy(faults)))


CONFIG = {"survivor_progress": {"max_stall_s": 3}, "replicas_converge": {},
          "drop_replica_samples": {"max_lost_fraction": 0.5}}


@pytest.mark.parametrize("kind", sorted(CONFIG))
def test_the_truth_passes(kind: str) -> None:
    recs, faults = job()
    result = verdict(kind, recs, faults, **CONFIG[kind])
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
    assert result.verdict == "fail" and "a final is no proof of steps it never committed" in result.reason, result.reason


def test_a_process_that_claims_another_group_is_a_contradiction() -> None:
    recs, faults = job()
    for r in recs:
        if r["pid"] == 100 and r["ev"] == "step" and r["step"] == 30:
            r["replica_group"] = 1
    for kind in CONFIG:
        result = verdict(kind, recs, faults)
        assert result.verdict == "fail" and "reports step as replica group 1" in result.reason, result.reason


def test_no_replica_groups_and_no_struck_group_prove_nothing() -> None:
    recs, faults = job()
    plain = [{k: v for k, v in r.items() if k != "replica_group"} for r in recs
             if r.get("ev") not in ("worker_spawn", "worker_exit")]
    for kind in CONFIG:
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


def test_the_lost_share_is_the_steps_a_group_was_down() -> None:
    recs, faults = job()
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    rejoined = min(r["step"] for r in recs if r["ev"] == "step" and r["pid"] == 302)
    assert result.figures["lost_group_steps"] == rejoined - 16, result.figures
    assert result.figures["lost_samples"] == (rejoined - 16) * BATCH
    over = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.1)
    assert over.verdict == "fail" and "beyond the bound of 10.0%" in over.reason, over.reason


def test_an_index_trained_twice_is_no_dropped_replica_s_loss() -> None:
    recs, faults = job()
    twin = next(r for r in recs if r["ev"] == "step" and r["pid"] == 302)
    twin["samples"] = samples_of(twin["step"], 0)[1]  # the rejoined group trained rg0's share again
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "trained twice in one epoch" in result.reason, result.reason


def test_a_gap_no_down_group_explains_fails() -> None:
    recs, faults = job()
    both = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] == 3)
    both["samples"] = both["samples"][1:]  # rg0 skipped one sample while both groups were up
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "gaps no down replica group explains" in result.reason, result.reason


def test_a_step_no_group_committed_fails_and_a_healing_step_is_not_trained() -> None:
    recs, faults = job()
    gone = [r for r in recs if not (r["ev"] == "step" and r["step"] == 30)]
    result = verdict("drop_replica_samples", gone, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "step(s) 30 committed by no replica group" in result.reason, result.reason
    healing = next(r for r in recs if r["ev"] == "step" and r["pid"] == 302)
    healing["participating"] = False
    rejoined = healing["step"]
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "pass" and result.figures["lost_group_steps"] == rejoined - 16 + 1, result.figures


def test_no_samples_is_inconclusive() -> None:
    recs, faults = job()
    for r in recs:
        if r["ev"] == "step":
            r.pop("samples")
    assert verdict("drop_replica_samples", recs, faults).verdict == "inconclusive"


def _harness(t: float, ev: str, **fields: Any) -> dict[str, Any]:
    return {"ev": ev, "t": t, "mono": t, "pid": 1, "host": "h", "source": "harness", **fields}


def test_a_final_is_no_proof_of_steps_never_committed() -> None:
    """The survivor stopped at the kill but wrote a final naming the last step."""
    recs, faults = job()
    cut = [r for r in recs if not (r["pid"] == 100 and r["ev"] in ("step", "final") and r["t"] > KILL_T)]
    cut.append({**next(r for r in recs if r["pid"] == 100 and r["ev"] == "final"), "t": KILL_T + 0.5})
    result = verdict("survivor_progress", cut, faults, max_stall_s=3)
    assert result.verdict == "fail" and "last committed step at 15" in result.reason, result.reason


def test_a_silent_survivor_the_harness_saw_spawn_is_judged() -> None:
    recs, faults = job()
    recs.append(_harness(recs[0]["t"], "worker_spawn", worker_pid=400, rank=0, node="rg2", attempt="0.0", generation=1))
    result = verdict("survivor_progress", sorted(recs, key=lambda r: r["t"]), faults, max_stall_s=3)
    assert result.verdict == "fail" and "rg2 (pid 400) wrote no final" in result.reason, result.reason


def test_a_later_fault_that_only_names_the_survivor_does_not_release_it() -> None:
    recs, faults = job(steps=120)
    cut = [r for r in recs if not (r["pid"] == 100 and r["ev"] in ("step", "final") and r["t"] > KILL_T + 8)]
    faults.append(FaultRecord(1, "network-degrade", "network-degrade#1", KILL_T + 8.05, details={"node": "rg0"},
                              t_revert=KILL_T + 9))
    result = verdict("survivor_progress", cut, faults, max_stall_s=3)
    assert result.verdict == "fail" and "never finished" in result.reason, result.reason


def test_a_live_group_s_missing_share_is_no_dropped_replica() -> None:
    """No fault at all; rg1's record of step 3 is lost while the quorum that committed it had both groups."""
    recs, _faults = job()
    cut = [r for r in recs if not (r["ev"] == "step" and r["pid"] == 201 and r["step"] == 3)]
    result = verdict("drop_replica_samples", cut, [], max_lost_fraction=0.5)
    assert result.verdict == "fail" and "rg1's share is missing, not dropped" in result.reason, result.reason


def test_indices_outside_the_dataset_and_unearned_idle_claims_fail() -> None:
    recs, faults = job()
    step3 = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] == 3)
    step3["samples"] = step3["samples"][1:] + [DATASET + 7]
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "outside the dataset" in result.reason, result.reason
    recs, faults = job()
    a = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] == 2)
    b = next(r for r in recs if r["ev"] == "step" and r["pid"] == 201 and r["step"] == 3)
    b["samples"], b["participating"] = list(a["samples"]), False  # a duplicate, hidden as "did not take part"
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "only the first step of a group that healed" in result.reason, result.reason


def test_a_rejoin_is_any_successor_whatever_the_fault_says() -> None:
    """A rejoin without a heal fails even with no start record, and with a fault that names neither pids nor node."""
    recs, faults = job(heal=False)
    no_start = [r for r in recs if not (r["ev"] == "start" and r["pid"] == 302)]
    assert "without healing from a peer" in verdict("replicas_converge", no_start, faults).reason
    faults[0].details = {"ranks": [0]}
    result = verdict("replicas_converge", recs, faults)
    assert result.verdict == "fail" and "after its predecessor's end" in result.reason, result.reason


def test_a_heal_with_no_live_peer_fails() -> None:
    recs, faults = job(late=True)
    recs = [r for r in recs if not (r["pid"] == 302 and r["ev"] in ("step", "final"))]
    back = next(r for r in recs if r["ev"] == "start" and r["pid"] == 302)["t"]
    base = {"pid": 302, "host": "h", "rank": 0, "world_size": 1, "attempt": "0.1", "replica_group": 1}
    recs.append({"ev": "heal", "t": back + 0.1, "mono": back + 0.1, **base, "step": 60, "participants": 1})
    for s in range(61, 80):
        t = back + 0.1 * (s - 59)
        recs.append({"ev": "step", "t": t, "mono": t, **base, "step": s, "epoch": 0, "samples": [], "loss": 1.0,
                     "participants": 1, "digest": f"{s:016x}"})
    result = verdict("replicas_converge", sorted(recs, key=lambda r: r["t"]), faults)
    assert result.verdict == "fail" and "no live peer" in result.reason, result.reason


def in_allreduce(kill_at: int = 15) -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """The truth of a collective-error kill: rg1's process dies inside step ``kill_at + 1``'s all-reduce (its
    ``instep`` landing the only record of who was struck: the fault names a rank number, no pid, no node), and
    rg0 discards that step, then commits it alone."""
    recs, faults = job(kill_at=kill_at)
    base = {"host": "h", "rank": 0, "world_size": 1, "attempt": "0.0"}
    e, take = samples_of(kill_at + 1, 0)
    recs += [{"ev": "instep", "t": KILL_T - 0.01, "mono": KILL_T - 0.01, "pid": 201, **base, "fault": 0,
              "kind": "collective-error", "where": "allreduce", "step": kill_at},
             {"ev": "discard", "t": KILL_T + 0.05, "mono": KILL_T + 0.05, "pid": 100, **base, "replica_group": 0,
              "step": kill_at + 1, "epoch": e, "samples": take}]
    faults[0] = FaultRecord(0, "collective-error", "collective-error#0", KILL_T - 0.5,
                            details={"ranks": [1], "where": "allreduce", "mode": "kill", "steps": 1})
    return sorted(recs, key=lambda r: r["t"]), faults


@pytest.mark.parametrize("kind", sorted(CONFIG))
def test_a_peer_killed_inside_the_all_reduce_is_struck_by_its_own_landing(kind: str) -> None:
    result = verdict(kind, *in_allreduce(), **CONFIG[kind])
    assert result.verdict == "pass", result.reason
    if kind == "survivor_progress":
        assert "rg0 (pid 100)" in result.figures["collective-error#0"]["survivors"]
    if kind == "drop_replica_samples":
        assert result.figures["discarded_steps"] == 1


def test_an_in_step_fault_that_landed_on_no_group_process_strikes_nothing() -> None:
    recs, faults = in_allreduce()
    no_landing = [r for r in recs if r["ev"] != "instep"]
    assert verdict("survivor_progress", no_landing, faults, max_stall_s=3).verdict == "inconclusive"
    # A landing claimed by a process the harness never saw spawn on a group's node names no group.
    stranger = [dict(r, pid=999) if r["ev"] == "instep" else r for r in recs]
    assert verdict("survivor_progress", stranger, faults, max_stall_s=3).verdict == "inconclusive"


def test_a_step_committed_across_a_peer_that_died_in_its_all_reduce_fails() -> None:
    """The lie a framework without discard tells: rg0 commits the step whose all-reduce lost rg1 as if both took part."""
    recs, faults = in_allreduce()
    lie = []
    for r in recs:
        if r["ev"] == "discard":
            r = dict(r, ev="step", loss=1.0, participants=2, digest=digest(r["step"]))
        elif r["ev"] == "step" and r["pid"] == 100 and r["step"] == 16:
            continue  # the step it trained again alone, now claimed above
        lie.append(r)
    result = verdict("drop_replica_samples", lie, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "rg1's share is missing, not dropped" in result.reason, result.reason


def stalled_third_group(kill: bool = False) -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """The truth plus a third group rg2 (pid 500) training with rg0 that stalls 5.8 s after the fault: a survivor
    whose stall must fail survivor_progress at a 3 s bound, whatever ``instep`` records claim."""
    recs, faults = job() if kill else in_allreduce()
    out = list(recs)
    out.append(dict(next(r for r in recs if r["ev"] == "worker_spawn" and r.get("worker_pid") == 100),
                    worker_pid=500, node="rg2"))
    for r in recs:
        if r["pid"] == 100 and r["ev"] in ("start", "final"):
            out.append(dict(r, pid=500, replica_group=2, t=r["t"] + 0.002, mono=r["t"] + 0.002))
        if r["pid"] == 100 and r["ev"] == "step" and not KILL_T - 0.3 < r["t"] < KILL_T + 5.5:
            out.append(dict(r, pid=500, replica_group=2, t=r["t"] + 0.002, mono=r["t"] + 0.002))
    return sorted(out, key=lambda r: r["t"]), faults


def landing(t: float, pid: int, **fields: Any) -> dict[str, Any]:
    return {"ev": "instep", "t": t, "mono": t, "pid": pid, "host": "h", "rank": 0, "world_size": 1, "attempt": "0.0",
            "fault": 0, "kind": "collective-error", "where": "allreduce", "step": 1, **fields}


@pytest.mark.parametrize("lie", [
    landing(KILL_T - 500, 500),                   # before the fault was armed
    landing(KILL_T, 999, replica_group=2),         # a process the harness never saw spawn, naming its own group
    landing(KILL_T, 500, kind="nan"),              # another kind than the fault's
    landing(KILL_T + 6.45, 500),                   # after the process committed more steps than a landing allows
    landing(KILL_T + 30, 500),                     # after the process ended (its final)
])
def test_a_landing_record_cannot_excuse_a_stalled_survivor(lie: dict[str, Any], monkeypatch) -> None:
    """An adversarial review's lies: each extra ``instep`` record tried to have rg2 counted as struck, so that its
    stall went unjudged."""
    import chaos.evidence.replica_groups as rg

    monkeypatch.setattr(rg, "LANDING_STEPS", 5)
    recs, faults = stalled_third_group()
    assert verdict("survivor_progress", recs, faults, max_stall_s=3).verdict == "fail"
    result = verdict("survivor_progress", sorted(recs + [lie], key=lambda r: r["t"]), faults, max_stall_s=3)
    assert result.verdict == "fail" and "rg2 (pid 500)" in result.reason, result.reason


def test_a_landing_of_a_fault_that_does_not_act_inside_the_step_strikes_nothing() -> None:
    recs, faults = stalled_third_group(kill=True)  # a kill-rank: its pids say whom it struck, no landing can add one
    lie = sorted(recs + [landing(KILL_T + 0.1, 500, kind="kill-rank")], key=lambda r: r["t"])
    result = verdict("survivor_progress", lie, faults, max_stall_s=3)
    assert result.verdict == "fail" and "rg2 (pid 500)" in result.reason, result.reason


def test_an_in_step_landing_by_a_process_that_was_already_gone_strikes_nothing() -> None:
    recs, faults = stalled_third_group()
    spawn = next(r for r in recs if r["ev"] == "worker_spawn" and r.get("worker_pid") == 500)
    dead = [dict(spawn, worker_pid=450, t=spawn["t"] - 10, mono=spawn["t"] - 10),
            dict(spawn, ev="worker_exit", worker_pid=450, t=spawn["t"] - 5, mono=spawn["t"] - 5)]
    lie = sorted(recs + dead + [landing(KILL_T, 450)], key=lambda r: r["t"])
    assert verdict("survivor_progress", lie, faults, max_stall_s=3).verdict == "fail"


def test_a_landing_record_of_an_unknown_process_makes_no_phantom_group_to_explain_a_gap() -> None:
    recs, faults = job()
    step3 = next(r for r in recs if r["ev"] == "step" and r["pid"] == 100 and r["step"] == 3)
    step3["samples"] = step3["samples"][1:]  # a sample rg0 dropped while both groups were up: a real gap
    assert verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.9).verdict == "fail"
    phantom = landing(KILL_T, 999, replica_group=2, step=15)
    result = verdict("drop_replica_samples", sorted(recs + [phantom], key=lambda r: r["t"]), faults,
                     max_lost_fraction=0.9)
    assert result.verdict == "fail", result.reason


def two_rank_groups(**kw: Any) -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """``job`` with replica groups of two ranks: each process gains a rank-1 twin (pid + 1000) in its group, and the
    group's batch of each step is split between them (two samples each)."""
    recs, faults = job(**kw)
    out: list[dict[str, Any]] = []
    for r in recs:
        twin = dict(r)
        if r.get("source") == "harness" and r["ev"] in ("worker_spawn", "worker_exit"):
            twin.update(worker_pid=r["worker_pid"] + 1000, rank=1)
        elif r.get("source") != "harness":
            r = dict(r, world_size=2)
            twin = dict(r, pid=r["pid"] + 1000, rank=1)
            if r["ev"] == "step":
                half = len(r["samples"]) // 2
                r["samples"], twin["samples"] = r["samples"][:half], r["samples"][half:]
        else:
            out.append(r)
            continue
        out += [r, twin]
    fault = faults[0]
    fault.details.update(pids=[201, 1201], ranks=[0, 1])
    return out, faults


def test_a_down_group_of_two_ranks_leaves_both_ranks_batches_untrained() -> None:
    """Issue 56 item 8: each missing (group, step) of a down group of two ranks loses two processes' batches, not one:
    the correct run passes, as the same run with one-rank groups does; one batch more lost still fails."""
    recs, faults = two_rank_groups()
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "pass", result.reason
    rejoined = min(r["step"] for r in recs if r["ev"] == "step" and r["pid"] == 302)
    assert result.figures["lost_group_steps"] == rejoined - 16, result.figures
    assert result.figures["lost_samples"] == (rejoined - 16) * BATCH, result.figures
    # rg0's rank 1 trained nothing of step 20 while rg1 was down: one batch more than the down group explains.
    lie = copy.deepcopy(recs)
    next(r for r in lie if r["ev"] == "step" and r["pid"] == 1100 and r["step"] == 20)["samples"] = []
    result = verdict("drop_replica_samples", lie, faults, max_lost_fraction=0.5)
    assert result.verdict == "fail" and "gaps no down replica group explains" in result.reason, result.reason
    # A phantom process of the down group (never seen spawned) claiming another rank makes its group no larger.
    phantom = [dict(r, pid=5201, rank=2) for r in recs if r.get("pid") == 201 and r["ev"] in ("start", "step")]
    lie = sorted(lie + phantom, key=lambda r: r["t"])
    assert verdict("drop_replica_samples", lie, faults, max_lost_fraction=0.5).verdict == "fail"


def test_a_healing_step_of_a_two_rank_group_loses_the_batches_of_the_ranks_that_sat_it_out() -> None:
    recs, faults = two_rank_groups()
    rejoined = min(r["step"] for r in recs if r["ev"] == "step" and r["pid"] == 302)
    for r in recs:
        if r["ev"] == "step" and r["pid"] in (302, 1302) and r["step"] == rejoined:
            r["participating"] = False
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "pass" and result.figures["lost_samples"] == (rejoined - 16 + 1) * BATCH, result.figures
    # Only rank 0 sat it out: rank 1's batch was trained, and only rank 0's is lost.
    next(r for r in recs if r["ev"] == "step" and r["pid"] == 1302 and r["step"] == rejoined)["participating"] = None
    result = verdict("drop_replica_samples", recs, faults, max_lost_fraction=0.5)
    assert result.verdict == "pass" and result.figures["lost_samples"] == (rejoined - 16) * BATCH + 2, result.figures


def test_a_group_the_harness_never_saw_spawn_is_one_rank_whatever_its_records_claim() -> None:
    """Issue 56 item 8, after an adversarial review: where the harness saw none of a group's processes spawn, the
    ranks the group's records name are only their word. Two one-line starts of never-seen processes claiming ranks
    1 and 2 of the down group rg1 must not triple its credit and hide an index rg0 really dropped."""
    from chaos.checks.drop_replica_samples import DropReplicaSamples, DropReplicaSamplesConfig
    from chaos.evidence.events import History
    from histsim import make_outcome

    def rec(ev: str, t: float, pid: int, g: int, **kw: object) -> dict:
        return {"ev": ev, "t": t, "mono": t, "pid": pid, "host": f"rg{g}", "rank": 0, "world_size": 1,
                "attempt": "0.0", "replica_group": g, **kw}

    honest = [rec("start", 1, 100, 0, dataset_size=8), rec("start", 1, 200, 1, dataset_size=8),
              rec("step", 2, 100, 0, step=1, epoch=0, samples=[0, 1], participants=2),
              rec("step", 2, 200, 1, step=1, epoch=0, samples=[2, 3], participants=2),
              rec("step", 3, 100, 0, step=2, epoch=0, samples=[4, 5], participants=2),
              rec("step", 3, 200, 1, step=2, epoch=0, samples=[6, 7], participants=2),
              rec("final", 3.5, 200, 1, step=2),
              # rg1 down at steps 3 and 4; rg0 drops index 3 at step 4 (one sample of its batch of two)
              rec("step", 4, 100, 0, step=3, epoch=1, samples=[0, 1], participants=1),
              rec("step", 5, 100, 0, step=4, epoch=1, samples=[2], participants=1),
              rec("start", 5.5, 201, 1, dataset_size=8),
              rec("step", 6, 100, 0, step=5, epoch=2, samples=[0, 1], participants=2),
              rec("step", 6, 201, 1, step=5, epoch=2, samples=[2, 3], participants=2),
              rec("step", 7, 100, 0, step=6, epoch=2, samples=[4, 5], participants=2),
              rec("step", 7, 201, 1, step=6, epoch=2, samples=[6, 7], participants=2)]
    forged = honest + [dict(rec("start", 1.1, 90001, 1, dataset_size=8), rank=1),
                       dict(rec("start", 1.1, 90002, 1, dataset_size=8), rank=2)]
    check = DropReplicaSamples(DropReplicaSamplesConfig(max_lost_fraction=0.5))
    for records in (honest, forged):
        result = check.evaluate(make_outcome(History(records)))
        assert result.verdict == "fail" and "gaps no down replica group explains" in result.reason, result.reason
