"""saved_on_preempt on synthetic preemptions: a job that saves on SIGTERM, one that ignores it, and the histories that prove nothing."""

from __future__ import annotations

from histsim import Cursor

from chaos.checks.base import FaultRecord
from chaos.evidence.events import History
from chaos.checks.saved_on_preempt import SavedOnPreempt, SavedOnPreemptConfig
from chaos.evidence.recovery import compute_recovery


def preempted(sim, *, saves: bool, preempt_after: int = 7, resume_from: int | None = None, reason: str | None = "preempt"):
    """0.0 runs to step ``preempt_after`` (periodic commit at 4), gets the SIGTERM, runs on to step 9
    (when it ignores it) or saves the step it is at; 1.0 resumes from its newest commit (or ``resume_from``)."""
    sim.start("0.0")
    cursor = sim.train("0.0", 1, preempt_after, Cursor(16), ckpt_every=4)
    t0 = sim.t + 0.5
    last = preempt_after
    if saves:
        sim.commit("0.0", last, reason=reason)
        sim.saved[last] = cursor
    else:
        cursor = sim.train("0.0", preempt_after + 1, 9, cursor)
        last = 9
    resumed = resume_from if resume_from is not None else (last if saves else 4)
    sim.start("1.0", load=resumed)
    sim.train("1.0", resumed + 1, 12, sim.resume(resumed) if resumed in sim.saved else Cursor(16))
    sim.final("1.0", 12)
    fault = FaultRecord(index=0, kind="preempt", label="preempt#0", t_inject=t0, details={"grace_s": 15})
    fault.recovery = compute_recovery(sim.history(), fault)
    return fault


def judge(sim, outcome_of, fault, **config):
    return SavedOnPreempt(SavedOnPreemptConfig(**config)).evaluate(outcome_of(sim.history(), faults=[fault]))


def test_a_job_that_saves_on_sigterm_and_resumes_from_it_passes(sim, outcome_of):
    fault = preempted(sim, saves=True)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "pass", result.reason
    assert result.figures["preempt#0"]["saved_step"] == 7 and result.figures["preempt#0"]["lost_steps"] == 0


def test_a_job_that_ignores_sigterm_fails_naming_the_lost_steps(sim, outcome_of):
    fault = preempted(sim, saves=False)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "fail"
    assert "5 step(s) lost" in result.reason and "steps 5..9" in result.reason
    assert "no checkpoint between the preemption and the kill" in result.reason
    assert judge(sim, outcome_of, fault, max_lost_steps=5).verdict == "pass"


def test_a_save_the_next_attempt_did_not_use_still_loses_steps(sim, outcome_of):
    fault = preempted(sim, saves=True, resume_from=4)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "fail" and "commit after the preemption began was step 7" in result.reason


def test_no_preemption_no_checkpoints_or_no_restart_prove_nothing(sim, outcome_of):
    result = judge(sim, outcome_of, FaultRecord(index=0, kind="preempt", label="p", t_inject=1.0,
                                               error="no job", status="failed"))
    assert result.verdict == "inconclusive" and "no preempt fault was injected" in result.reason

    sim.start("0.0")
    sim.train("0.0", 1, 6, Cursor(16))
    fault = FaultRecord(index=0, kind="preempt", label="preempt#0", t_inject=sim.t + 0.5)
    fault.recovery = compute_recovery(sim.history(), fault)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "inconclusive" and "no ckpt_commit" in result.reason

    sim.commit("0.0", 6)  # saved, but nothing ran afterwards
    fault.recovery = compute_recovery(sim.history(), fault)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "inconclusive" and "never ran again" in result.reason


def test_a_preemption_right_after_a_periodic_save_did_not_test_the_save(sim, outcome_of):
    fault = preempted(sim, saves=False, preempt_after=4)
    # Ignoring SIGTERM from step 4 on still loses 5..9: only a stop exactly at the periodic save is untested.
    assert judge(sim, outcome_of, fault).verdict == "fail"
    sim2 = type(sim)()
    sim2.start("0.0")
    sim2.train("0.0", 1, 8, Cursor(16), ckpt_every=4)
    t0 = sim2.t + 0.5
    sim2.start("1.0", load=8)
    sim2.train("1.0", 9, 12, sim2.resume(8))
    fault = FaultRecord(index=0, kind="preempt", label="preempt#0", t_inject=t0)
    fault.recovery = compute_recovery(sim2.history(), fault)
    result = judge(sim2, outcome_of, fault)
    assert result.verdict == "inconclusive" and "not tested" in result.reason


def test_a_save_after_the_preemption_not_marked_as_one_proves_nothing(sim, outcome_of):
    """A periodic save that fell between the preemption and the kill (seen in CI: the deaf fixture's
    step-30 save 0.26 s after the fault) looks the same as a save on SIGTERM unless it says why."""
    fault = preempted(sim, saves=True, reason=None)
    result = judge(sim, outcome_of, fault)
    assert result.verdict == "inconclusive", result.reason
    assert "not marked as a save on SIGTERM" in result.reason and "reason='preempt'" in result.reason
    # With a bound on lost steps the question is the bound, which no lost step meets.
    assert judge(sim, outcome_of, fault, max_lost_steps=2).verdict == "pass"


def _requeued_with_one_label(sim, *, saves: bool):
    """The issue's case (issue 32 item 19): the user's script labels both Slurm jobs ``0.0``; the
    harness saw the first job's ranks in launch 0 and the requeued job's in launch 1."""
    fault = preempted(sim, saves=saves)
    records = []
    for r in sim.records:
        r = dict(r)
        if r["attempt"] == "1.0":
            r["attempt"], r["pid"] = "0.0", r["pid"] + 100   # the new job's processes, old label
        records.append(r)
    first = min(r["t"] for r in records)
    restart = min(r["t"] for r in records if r["pid"] >= 200)
    for rank in range(2):
        records.append({"ev": "worker_spawn", "t": first - 0.5, "source": "harness", "node": "h",
                        "worker_pid": 100 + rank, "rank": rank, "attempt": "0.0", "generation": 0})
        records.append({"ev": "worker_spawn", "t": restart - 0.5, "source": "harness", "node": "h",
                        "worker_pid": 200 + rank, "rank": rank, "attempt": "1.0", "generation": 1})
    history = History(records)
    history.align_attempts()
    fault.recovery = compute_recovery(history, fault)
    return history, fault


def test_one_attempt_rule_across_a_requeue_that_keeps_the_scripts_label(outcome_of):
    from histsim import Sim

    history, fault = _requeued_with_one_label(Sim(), saves=True)
    assert (fault.recovery["attempt_before"], fault.recovery["attempt_after"]) == ("0.0", "1.0")
    result = SavedOnPreempt(SavedOnPreemptConfig()).evaluate(outcome_of(history, faults=[fault]))
    assert result.verdict == "pass", result.reason

    history, fault = _requeued_with_one_label(Sim(), saves=False)
    result = SavedOnPreempt(SavedOnPreemptConfig()).evaluate(outcome_of(history, faults=[fault]))
    assert result.verdict == "fail" and "5 step(s) lost" in result.reason, result.reason
