"""restarted_in_process on a simulated NVRx in-process restart (inprocess_sim.job): the truth passes, each lie is
refused. Each lie breaks exactly one promise."""

from __future__ import annotations

from typing import Any

import pytest
from inprocess_sim import FAULT_T, job, verdict


def test_the_truth_passes_with_the_restart_latency_per_rank() -> None:
    result = verdict(*job(restart=9.0), max_s=30)
    assert result.verdict == "pass", result.reason
    figs = result.figures["collective-error#0"]
    assert figs["latency_s"] == {0: pytest.approx(9.2), 1: pytest.approx(9.2)} and figs["iteration"] == {0: 1, 1: 1}


def test_a_restart_slower_than_the_bound_fails() -> None:
    result = verdict(*job(restart=35.0), max_s=30)
    assert result.verdict == "fail" and "beyond the bound of 30 s" in result.reason, result.reason


def test_a_new_worker_process_is_an_escalation_not_an_in_process_restart() -> None:
    recs, faults = job()
    recs.append({"ev": "worker_spawn", "t": FAULT_T + 5, "mono": FAULT_T + 5, "pid": 1, "host": "h",
                 "source": "harness", "worker_pid": 202, "rank": 1, "node": "h", "attempt": "0.1", "generation": 2})
    result = verdict(recs, faults)
    assert result.verdict == "fail" and "escalated to a process restart" in result.reason, result.reason


def test_a_rank_that_never_reported_its_restart_fails() -> None:
    recs, faults = job()
    result = verdict([r for r in recs if not (r["ev"] == "inprocess_restart" and r["rank"] == 0)], faults)
    assert result.verdict == "fail" and "rank 0 (h, pid 100) reported no in-process restart" in result.reason, result.reason


def test_a_restart_claimed_by_another_process_fails() -> None:
    recs, faults = job()
    forged = [dict(r, pid=555) if r["ev"] == "inprocess_restart" and r["rank"] == 1 else r for r in recs]
    result = verdict(forged, faults)
    assert result.verdict == "fail" and "came from [('h', 555)], not its process ('h', 101)" in result.reason, result.reason


def test_steps_after_the_restart_from_another_process_fail() -> None:
    recs, faults = job()
    forged = [dict(r, pid=777) if r["ev"] == "step" and r["rank"] == 1 and r["t"] > FAULT_T else r for r in recs]
    result = verdict(forged, faults)
    assert result.verdict == "fail" and "came from [('h', 777)], not its process" in result.reason, result.reason


def test_a_restart_with_no_step_after_it_fails() -> None:
    recs, faults = job()
    result = verdict([r for r in recs if not (r["ev"] in ("step", "final") and r["rank"] == 0 and r["t"] > FAULT_T)],
                     faults)
    assert result.verdict == "fail" and "never trained a step after it" in result.reason, result.reason


@pytest.mark.parametrize("iteration", [0, -1, "1", True, None])
def test_a_restart_that_is_not_a_later_iteration_fails(iteration: Any) -> None:
    recs, faults = job()
    forged = [dict(r, iteration=iteration) if r["ev"] == "inprocess_restart" and r["rank"] == 0 else r for r in recs]
    result = verdict(forged, faults)
    assert result.verdict == "fail" and "carries iteration" in result.reason, result.reason


def test_a_restart_before_the_fault_does_not_count() -> None:
    recs, faults = job()
    early = [dict(r, t=FAULT_T - 0.5, mono=FAULT_T - 0.5) if r["ev"] == "inprocess_restart" and r["rank"] == 1
             else r for r in recs]
    result = verdict(early, faults)
    assert result.verdict == "fail" and "rank 1 (h, pid 101) reported no in-process restart" in result.reason, result.reason


def test_a_rank_the_harness_never_saw_spawn_is_a_contradiction() -> None:
    recs, faults = job()
    result = verdict([r for r in recs if not (r["ev"] == "worker_spawn" and r["worker_pid"] == 101)], faults)
    assert result.verdict == "fail" and "rank 1 had no live process the harness saw" in result.reason, result.reason


def test_a_target_whose_processes_the_harness_does_not_watch_is_inconclusive() -> None:
    recs, faults = job()
    result = verdict([r for r in recs if r["ev"] != "worker_spawn"], faults)
    assert result.verdict == "inconclusive" and "saw no worker of attempt 0.0 spawn" in result.reason, result.reason


def test_records_before_the_fault_from_two_processes_for_one_rank_are_a_contradiction() -> None:
    recs, faults = job()
    recs.append({"ev": "worker_spawn", "t": FAULT_T - 2.5, "mono": FAULT_T - 2.5, "pid": 1, "host": "h",
                 "source": "harness", "worker_pid": 303, "rank": 1, "node": "h", "attempt": "0.0", "generation": 1})
    recs.append({"ev": "step", "t": FAULT_T - 0.2, "mono": FAULT_T - 0.2, "pid": 303, "host": "h", "rank": 1,
                 "world_size": 2, "attempt": "0.0", "step": 25, "epoch": 0, "samples": [51], "loss": 1.0})
    result = verdict(sorted(recs, key=lambda r: r["t"]), faults)
    assert result.verdict == "fail" and "were all rank 1 when it struck" in result.reason, result.reason


def test_a_fault_inside_the_step_struck_the_attempt_its_ranks_reported_from() -> None:
    recs, faults = job()
    faults[0].details.pop("attempt")  # chaos.instep faults record the command, not the attempt
    assert verdict(recs, faults, max_s=30).verdict == "pass"


def test_no_fault_or_no_attempt_is_inconclusive() -> None:
    recs, faults = job()
    assert verdict(recs, []).verdict == "inconclusive"
    faults[0].details.pop("attempt")
    early = [r for r in recs if r["t"] > FAULT_T or r.get("source") == "harness"]
    assert verdict(early, faults).verdict == "inconclusive"
    assert verdict([], job()[1]).verdict == "inconclusive"


def _with_a_scene_setting_fault() -> tuple[list[dict[str, Any]], list[Any]]:
    """The truth with a peer frozen (hang-rank, injected 0.1 s before the judged fault) that needs no restart."""
    from chaos.checks.base import FaultRecord

    recs, faults = job()
    scene = FaultRecord(1, "hang-rank", "hang-rank#1", FAULT_T - 0.1, {"attempt": "0.0", "ranks": [0]})
    return recs, [scene, *faults]


def test_a_fault_that_only_sets_the_scene_is_left_out_when_the_judged_kinds_are_named() -> None:
    recs, faults = _with_a_scene_setting_fault()
    # Unnamed, every fault is judged: the frozen peer's evidence ends where the judged fault struck, with no restart.
    unnamed = verdict(recs, faults)
    assert unnamed.verdict == "fail" and unnamed.reason.startswith("hang-rank#1"), unnamed.reason
    named = verdict(recs, faults, judged=["collective-error"])
    assert named.verdict == "pass" and "hang-rank" not in named.figures, named.reason


def test_the_judged_kind_still_needs_its_restart() -> None:
    recs, faults = _with_a_scene_setting_fault()
    lie = [r for r in recs if not (r["ev"] == "inprocess_restart" and r["rank"] == 1)]
    result = verdict(lie, faults, judged=["collective-error"])
    assert result.verdict == "fail" and "collective-error#0" in result.reason, result.reason


def test_no_fault_of_the_judged_kinds_is_inconclusive() -> None:
    recs, faults = _with_a_scene_setting_fault()
    result = verdict(recs, faults, judged=["nvrx-fault"])
    assert result.verdict == "inconclusive" and "no nvrx-fault fault" in result.reason, result.reason
