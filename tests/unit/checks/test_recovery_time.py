"""recovery_time and the per-fault figures of chaos.evidence.recovery, on a synthetic kill and restart."""

from __future__ import annotations

from chaos.checks.base import FaultRecord
from chaos.checks.recovery_time import RecoveryTime, RecoveryTimeConfig
from chaos.evidence.recovery import compute_recovery


def killed_and_resumed(sim):
    """0.0 runs to step 8 (commit at 6); rank 1 is killed; 0.1 loads 6 and runs on. Returns the fault."""
    from histsim import Cursor

    sim.start("0.0")
    sim.train("0.0", 1, 8, Cursor(16), ckpt_every=3)
    t_kill = sim.t + 0.5
    sim.t += 1.0
    sim.records.append({"ev": "worker_exit", "t": sim.t, "source": "harness", "worker_pid": 101,
                        "attempt": "0.0", "rank": 1})
    sim.t += 1.0
    sim.records.append({"ev": "worker_exit", "t": sim.t, "source": "harness", "worker_pid": 100, "attempt": "0.0",
                        "rank": 0})
    sim.start("0.1", load=6)
    sim.train("0.1", 7, 12, sim.resume(6))
    return FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=t_kill,
                       details={"pids": [101]})


def test_compute_recovery_figures(sim):
    fault = killed_and_resumed(sim)
    h = sim.history()
    figures = compute_recovery(h, fault)
    t0 = fault.t_inject
    starts = [r for r in h.of("start", attempt="0.1")]
    first_step = h.of("step", attempt="0.1")[0]
    regain = next(r for r in h.of("step", attempt="0.1") if r["step"] >= 8)
    assert figures["attempt_before"] == "0.0" and figures["attempt_after"] == "0.1"
    assert figures["pre_fault_max_step"] == 8
    # The victim's own exit (pid 101) is the fault, not a reaction; rank 0's exit (pid 100) is.
    assert figures["detect_s"] == 1.5
    assert figures["restart_s"] == round(starts[0]["t"] - t0, 3)
    assert figures["resume_s"] == round(first_step["t"] - t0, 3)
    assert figures["regain_s"] == round(regain["t"] - t0, 3)
    # It resumed from the newest durable checkpoint: nothing lost beyond it; the 2 steps past it are
    # where the fault landed, reported beside the gated figure.
    assert figures["resumed_from_step"] == 6 and figures["lost_steps"] == 0
    assert figures["durable_step"] == 6 and figures["landed_step"] == 8 and figures["steps_since_ckpt"] == 2


def test_no_restart_leaves_the_later_figures_unset(sim):
    from histsim import Cursor

    sim.start("0.0")
    sim.train("0.0", 1, 4, Cursor(16))
    fault = FaultRecord(index=0, kind="kill-rank", label="k", t_inject=sim.t + 0.5)
    figures = compute_recovery(sim.history(), fault)
    assert figures["restart_s"] is None and figures["resume_s"] is None and figures["lost_steps"] is None


def _slurm_job(sim, t, state, restarts, nodes="node[0-1]"):
    sim.records.append({"ev": "slurm_job", "t": t, "source": "harness", "job_id": "7", "state": state,
                        "restarts": restarts, "nodes": nodes})


def test_requeue_figures_come_from_the_job_running_again_after_a_requeue(sim):
    fault = killed_and_resumed(sim)
    t0 = fault.t_inject
    _slurm_job(sim, t0 - 5, "RUNNING", 0)
    _slurm_job(sim, t0 + 1.0, "COMPLETING", 1, "node0")  # requeued: not yet running again
    _slurm_job(sim, t0 + 1.5, "PENDING", 1, "")
    _slurm_job(sim, t0 + 2.0, "RUNNING", 1, "node[0,2]")
    figures = compute_recovery(sim.history(), fault)
    assert figures["requeue_s"] == 2.0
    assert figures["requeue_share"] == round(2.0 / figures["resume_s"], 3)
    assert "node[0,2]" in figures["evidence"]["requeue_s"]


def test_requeue_figures_are_none_when_slurm_never_requeued_and_absent_off_slurm(sim, outcome_of):
    fault = killed_and_resumed(sim)
    assert "requeue_s" not in compute_recovery(sim.history(), fault)  # not a slurm job
    _slurm_job(sim, fault.t_inject - 5, "RUNNING", 0)
    _slurm_job(sim, fault.t_inject + 9, "COMPLETED", 0)  # torchrun restarted the ranks in the job
    figures = compute_recovery(sim.history(), fault)
    assert figures["requeue_s"] is None and figures["requeue_share"] is None
    result = RecoveryTime(RecoveryTimeConfig(metric="requeue_s", max_s=60)).evaluate(
        outcome_of(sim.history(), faults=[fault_with(**figures)]))
    assert result.verdict == "fail" and "never ran the job again" in result.reason


def fault_with(**recovery):
    return FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=0.0, recovery=recovery)


def test_bound_on_the_named_metric(sim, outcome_of):
    outcome = outcome_of(sim.history(), faults=[fault_with(resume_s=4.0, lost_steps=3)])
    assert RecoveryTime(RecoveryTimeConfig(metric="resume_s", max_s=5)).evaluate(outcome).verdict == "pass"
    result = RecoveryTime(RecoveryTimeConfig(metric="resume_s", max_s=3)).evaluate(outcome)
    assert result.verdict == "fail" and "resume_s 4 exceeds the bound 3" in result.reason
    assert RecoveryTime(RecoveryTimeConfig(metric="lost_steps", max=2)).evaluate(outcome).verdict == "fail"


def test_a_recovery_that_never_happened_fails(sim, outcome_of):
    outcome = outcome_of(sim.history(), faults=[fault_with(resume_s=None)])
    result = RecoveryTime(RecoveryTimeConfig(max_s=30)).evaluate(outcome)
    assert result.verdict == "fail" and "never happened" in result.reason


def test_no_injected_fault_is_inconclusive(sim, outcome_of):
    failed = FaultRecord(index=0, kind="kill-rank", label="k", t_inject=0.0, error="no such rank", status="failed")
    result = RecoveryTime(RecoveryTimeConfig(max_s=30)).evaluate(outcome_of(sim.history(), faults=[failed]))
    assert result.verdict == "inconclusive" and "no fault was injected" in result.reason


def hang_released_then_finished(sim, *, peer_timeout: bool):
    """Rank 1 is frozen at step 4 and released 10 s later; with a collective timeout its peer aborts
    before the release, without one the job carries on and ends normally."""
    from histsim import Cursor

    sim.start("0.0")
    cursor = sim.train("0.0", 1, 4, Cursor(16), ckpt_every=2)
    t0 = sim.t + 0.5
    if peer_timeout:
        sim.t += 3.0
        sim.records.append({"ev": "worker_exit", "t": sim.t, "source": "harness", "worker_pid": 100,
                            "attempt": "0.0", "rank": 0})
    sim.t = t0 + 10.0
    release = sim.t
    if not peer_timeout:
        sim.train("0.0", 5, 8, cursor)
        sim.final("0.0", 8)
        for pid, rank in ((100, 0), (101, 1)):
            sim.t += 0.1
            sim.records.append({"ev": "worker_exit", "t": sim.t, "source": "harness", "worker_pid": pid,
                                "attempt": "0.0", "rank": rank})
        sim.records.append({"ev": "exit", "t": sim.t + 0.1, "source": "harness", "code": 0})
    return FaultRecord(index=0, kind="hang-rank", label="hang-rank#0", t_inject=t0, details={"pids": [101]},
                       t_revert=release, t_release=release)


def test_a_hang_that_healed_by_itself_was_never_detected(sim):
    fault = hang_released_then_finished(sim, peer_timeout=False)
    figures = compute_recovery(sim.history(), fault)
    # The job's normal end (exits after `final`) is not a reaction to the hang.
    assert figures["detect_s"] is None, figures


def test_a_peer_aborting_before_the_release_is_the_detection(sim):
    fault = hang_released_then_finished(sim, peer_timeout=True)
    figures = compute_recovery(sim.history(), fault)
    assert figures["detect_s"] == 2.5 and "worker_exit" in figures["evidence"]["detect_s"]


def test_a_reaction_after_the_release_does_not_count(sim):
    fault = hang_released_then_finished(sim, peer_timeout=False)
    sim.records.append({"ev": "health", "t": fault.t_release + 1.0, "rank": 0, "attempt": "0.0",
                        "source": "watchdog", "code": 0, "device": 0, "action": "restart"})
    assert compute_recovery(sim.history(), fault)["detect_s"] is None


def test_a_fault_before_the_first_start_is_unjudgeable(sim, outcome_of):
    from histsim import Cursor

    early = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=sim.t - 5.0)
    sim.start("0.1")  # only the restarted attempt: the first launch must not count as the restart
    sim.train("0.1", 1, 4, Cursor(16))
    early.recovery = compute_recovery(sim.history(), early)
    assert early.recovery["restart_s"] is None and "before any rank" in early.recovery["unjudgeable"]
    result = RecoveryTime(RecoveryTimeConfig(max_s=30)).evaluate(outcome_of(sim.history(), faults=[early]))
    assert result.verdict == "inconclusive" and "before any rank of the job had started" in result.reason


def test_the_step_rate_while_a_fault_acts_against_before_it() -> None:
    from chaos.evidence.events import History

    steps = [{"ev": "step", "t": float(t), "attempt": "0.0", "rank": 0, "step": i + 1, "epoch": 0}
             for i, t in enumerate([1, 2, 3, 4, 5, 7, 9, 11, 13, 14, 15])]
    history = History([{"ev": "start", "t": 0.5, "attempt": "0.0", "rank": 0}, *steps])
    fault = FaultRecord(index=0, kind="straggler", label="straggler#0", t_inject=5.0, t_release=13.0)
    rate = compute_recovery(history, fault)["step_rate"]
    # One step a second before; one every 2 s for the 8 s the straggler acted: half speed.
    assert rate == {"before": 1.0, "during": 0.5, "ratio": 0.5, "window_s": 8.0}
    few = History([{"ev": "start", "t": 0.5, "attempt": "0.0", "rank": 0}, *steps[:2]])
    assert compute_recovery(few, fault)["step_rate"] is None  # too little to know the normal rate


def test_a_recovery_time_or_goodput_check_without_a_bound_is_refused_when_the_experiment_is_read() -> None:
    """Issue 32 item 17: 'recovery_time: {}' passed a 3004 s resume and 'goodput: {}' 0.7 % goodput."""
    import pytest
    from pydantic import ValidationError

    from chaos.checks.goodput import GoodputConfig

    with pytest.raises(ValidationError, match=r"recovery_time of resume_s needs a bound: set max_s"):
        RecoveryTimeConfig()
    with pytest.raises(ValidationError, match=r"recovery_time of lost_steps needs a bound: set max \(steps\)"):
        RecoveryTimeConfig(metric="lost_steps")
    with pytest.raises(ValidationError, match=r"goodput needs a bound: set min"):
        GoodputConfig()
    assert RecoveryTimeConfig(metric="lost_steps", max=0).max == 0 and GoodputConfig(min=0.5).min == 0.5


def test_a_restart_that_was_spawned_but_never_joined_is_no_restart(sim, outcome_of) -> None:
    """Issue 32 item 13: the next attempt spawned, never sent start, was named stuck: restart_s 1.2 PASSed."""
    from histsim import Cursor

    sim.start("0.0")
    sim.train("0.0", 1, 8, Cursor(16), ckpt_every=3)
    t_kill = sim.t + 0.5
    sim.t += 1.0
    for rank in (1, 0):
        sim.records.append({"ev": "worker_exit", "t": sim.t, "source": "harness", "worker_pid": 100 + rank,
                            "attempt": "0.0", "rank": rank})
    sim.t += 1.2
    for rank in (0, 1):
        sim.records.append({"ev": "worker_spawn", "t": sim.t, "source": "harness", "worker_pid": 200 + rank,
                            "attempt": "0.1", "rank": rank, "generation": 1})
    sim.records.append({"ev": "stuck", "t": sim.t + 30, "source": "harness", "attempt": "0.1"})
    fault = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=t_kill, details={"pids": [101]})
    figures = compute_recovery(sim.history(), fault)
    assert figures["restart_s"] is None and figures["attempt_after"] == "0.1"
    assert "no rank of it sent start: it never joined" in figures["evidence"]["restart_s"]
    fault.recovery = figures
    result = RecoveryTime(RecoveryTimeConfig(metric="restart_s", max_s=30)).evaluate(
        outcome_of(sim.history(), faults=[fault]))
    assert result.verdict == "fail" and "restart_s never happened" in result.reason


def test_an_xid_nobody_monitored_is_not_detected_by_an_unrelated_alert(sim) -> None:
    """Issue 32 item 9: an XID 79 on device 1 was 'detected' by a straggler alert about rank 0."""
    from histsim import Cursor

    sim.start("0.0")
    sim.train("0.0", 1, 8, Cursor(16))
    t0 = sim.t + 0.5
    fault = FaultRecord(index=0, kind="xid", label="xid#0", t_inject=t0, details={"code": 79, "device": 1, "rank": 1})
    sim.t += 1.0
    sim.emit("health", "0.0", 0, source="straggler", code="slow_rank", device=0, action="alert", slow_rank=0)
    sim.emit("health", "0.0", 1, source="file", code=13, device=1, action="restart")  # another XID code
    assert compute_recovery(sim.history(), fault)["detect_s"] is None
    sim.emit("health", "0.0", 1, source="file", code=79, device=1, action="exclude")
    figures = compute_recovery(sim.history(), fault)
    assert figures["detect_s"] is not None and "health" in figures["evidence"]["detect_s"]
