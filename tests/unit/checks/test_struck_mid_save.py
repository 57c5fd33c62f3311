"""struck_mid_save: only a kill that lands inside a save which then never commits is a torn save."""

from __future__ import annotations

from histsim import make_outcome

from chaos.checks.struck_mid_save import StruckMidSave, StruckMidSaveConfig
from chaos.evidence.events import History
from chaos.evidence.outcome import FaultRecord


def kill(t: float = 100.0, attempt: str = "0.0") -> FaultRecord:
    return FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=t,
                       details={"ranks": [0], "pids": [11], "attempt": attempt})


def save(step: int, begin: float, commit: float | None = None, attempt: str = "0.0", path: str = "") -> list[dict]:
    path = path or f"/c/{step}"
    out = [{"ev": "ckpt_begin", "t": begin, "attempt": attempt, "rank": 0, "step": step, "path": path}]
    if commit is not None:
        out.append({"ev": "ckpt_commit", "t": commit, "attempt": attempt, "rank": 0, "step": step,
                    "path": path, "bytes": 10, "seconds": commit - begin})
    return out


def judge(records: list[dict], fault: FaultRecord | None = None, **cfg):
    return StruckMidSave(StruckMidSaveConfig(**cfg)).evaluate(make_outcome(History(records), faults=[fault or kill()]))


def test_a_kill_inside_a_save_that_never_commits_passes() -> None:
    r = judge(save(10, 90.0, 91.0) + save(20, 99.6))
    assert r.verdict == "pass" and "struck 0.4 s into the step-20 save" in r.reason


def test_a_kill_between_saves_fails() -> None:
    r = judge(save(10, 90.0, 91.0) + save(20, 99.0, 99.5))
    assert r.verdict == "fail" and "committed 0.5 s before it struck" in r.reason


def test_a_save_that_committed_after_the_kill_was_not_torn() -> None:
    r = judge(save(20, 99.6, 101.0))
    assert r.verdict == "fail" and "still committed" in r.reason


def test_a_kill_before_any_save_fails() -> None:
    assert "before any save began" in judge(save(10, 120.0, 121.0)).reason


def test_a_save_of_another_attempt_does_not_count() -> None:
    # The open save belongs to attempt 0.1; the kill struck attempt 0.0, which had no save open.
    assert judge(save(20, 99.6, attempt="0.1")).verdict == "fail"


def test_nothing_to_judge_is_inconclusive() -> None:
    assert judge([]).verdict == "inconclusive"
    other = FaultRecord(index=0, kind="hang-rank", label="hang-rank#0", t_inject=100.0, details={"attempt": "0.0"})
    assert judge(save(20, 99.6), fault=other).verdict == "inconclusive"


def test_a_step_that_writes_two_files_is_two_saves() -> None:
    """Lightning writes the top-k checkpoint, then last.ckpt, both of one step: the first's commit is not the second's."""
    r = judge(save(10, 98.0, 99.0, path="/c/epoch=0-step=10.ckpt") + save(10, 99.1, path="/c/last.ckpt"))
    assert r.verdict == "pass" and "struck 0.9 s into the step-10 save" in r.reason, r.reason
    r = judge(save(10, 98.0, path="/c/epoch=0-step=10.ckpt") + save(10, 99.1, 101.0, path="/c/last.ckpt"))
    assert r.verdict == "fail" and "still committed" in r.reason, r.reason


def test_a_commit_spelled_differently_from_every_begin_still_counts() -> None:
    """The begin says one path, the commit another spelling of it: cannot be told apart, so not a torn save."""
    r = judge(save(10, 99.1, path="/c/ckpt/../ckpt/step_10") + [
        {"ev": "ckpt_commit", "t": 99.5, "attempt": "0.0", "rank": 0, "step": 10, "path": "relative/step_10",
         "bytes": 1, "seconds": 0.4}])
    assert r.verdict == "fail" and "committed 0.5 s before it struck" in r.reason, r.reason


def test_a_kill_after_the_save_was_durable_but_before_its_commit_was_written_fails() -> None:
    """Issue 32 item 10: the next attempt loads that very save, verified whole: nothing was torn."""
    load = {"ev": "ckpt_load", "t": 105.0, "attempt": "0.1", "rank": 0, "step": 20, "path": "/c/20"}
    look = {"ev": "ckpt_verify", "t": 105.2, "source": "harness", "seen": "ckpt_load", "path": "/c/20",
            "attempt": "0.1", "t_event": 105.0, "ok": True, "step": 20}
    r = judge(save(20, 99.6) + [load, look])
    assert r.verdict == "fail" and "was already durable: attempt 0.1 loaded it" in r.reason
    # Without the harness's look it could be a torn save the stack loaded anyway: not this check's finding.
    assert judge(save(20, 99.6) + [load]).verdict == "pass"
    # A look that found it invalid: the save was torn.
    assert judge(save(20, 99.6) + [load, {**look, "ok": False}]).verdict == "pass"


def staged(step: int, t: float, attempt: str = "0.0", rank: int = 0) -> dict:
    return {"ev": "ckpt_staged", "t": t, "attempt": attempt, "rank": rank, "step": step, "seconds": 0.01}


def test_phase_staged_a_kill_after_the_staging_before_the_writer_began_passes() -> None:
    # The step-10 save, staged and committed with its writer's begin, shows the workload reports its begins.
    r = judge([staged(10, 89.9), *save(10, 90.0, 91.0), staged(20, 99.7), *save(20, 100.7)], phase="staged")
    assert r.verdict == "pass", r.reason
    assert "struck 0.3 s after the step-20 state was staged" in r.reason and r.figures["kill-rank#0"]["phase"] == "staged"


def test_phase_staged_refuses_a_kill_while_writing_one_before_any_staging_and_a_save_that_landed() -> None:
    writing = judge(save(10, 90.0, 91.0) + [staged(20, 99.0)] + save(20, 99.5), phase="staged")
    assert writing.verdict == "fail" and "writer had begun 0.5 s before it struck" in writing.reason
    early = judge([staged(20, 101.0)] + save(20, 101.5, 102.0), phase="staged")
    assert early.verdict == "fail" and "before any save was staged" in early.reason
    committed = judge([staged(20, 99.7)] + save(20, 100.2, 100.9), phase="staged")
    assert committed.verdict == "fail" and "committed all the same" in committed.reason
    # The staging of another attempt does not count: the kill struck attempt 0.0, which staged nothing.
    assert judge([staged(20, 99.7, attempt="0.1")], phase="staged").verdict == "fail"
    # Nothing reported about staging: when the state was staged is unknown.
    assert judge(save(20, 99.6), phase="staged").verdict == "inconclusive"


def test_phase_staged_a_save_that_reached_disk_all_the_same_was_not_lost() -> None:
    """The writer began after the kill (on the rank that lived) and its save was loaded whole by the next attempt."""
    load = {"ev": "ckpt_load", "t": 105.0, "attempt": "0.1", "rank": 0, "step": 20, "path": "/c/20"}
    look = {"ev": "ckpt_verify", "t": 105.2, "source": "harness", "seen": "ckpt_load", "path": "/c/20",
            "attempt": "0.1", "t_event": 105.0, "ok": True, "step": 20}
    r = judge([staged(20, 99.7)] + save(20, 100.7) + [load, look], phase="staged")
    assert r.verdict == "fail" and "reached disk" in r.reason, r.reason


def test_phase_staged_a_writer_that_began_or_committed_before_the_staging_was_reported_fails() -> None:
    """A review's lies: the writer thread began (and even committed) before the staging was reported, or one rank's
    staging came after the begin: the save was under way, or done, when the kill struck."""
    committed_first = save(20, 99.70, 99.705) + [staged(20, 99.71)]
    assert judge(committed_first, phase="staged").verdict == "fail"
    skewed = [staged(20, 99.70, rank=0)] + save(20, 99.71) + [staged(20, 99.72, rank=1)]
    r = judge(skewed, phase="staged")
    assert r.verdict == "fail" and "writer had begun" in r.reason, r.reason


def test_phase_staged_the_struck_rank_must_have_staged_it() -> None:
    struck_1 = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=100.0,
                           details={"ranks": [1], "pids": [12], "attempt": "0.0"})
    r = judge([staged(20, 99.7, rank=0)], fault=struck_1, phase="staged")
    assert r.verdict == "fail" and "rank(s) [1] it struck had not staged" in r.reason, r.reason
    both = [staged(10, 89.9, rank=0), staged(10, 89.9, rank=1), *save(10, 90.0, 91.0), staged(20, 99.7, rank=0),
            staged(20, 99.7, rank=1)]
    assert judge(both, fault=struck_1, phase="staged").verdict == "pass"


def commit(step: int, t: float, attempt: str = "0.0") -> dict:
    return {"ev": "ckpt_commit", "t": t, "attempt": attempt, "rank": 0, "step": step, "path": f"/c/{step}",
            "bytes": 10, "seconds": 1.0}


def test_phase_staged_a_workload_that_never_reports_a_begin_is_inconclusive() -> None:
    """Issue 56 item 4: no ckpt_begin anywhere is no proof the writer had not begun (it may have been tearing the
    file when the kill struck): its absence counts only where the workload's committed staged saves carry one."""
    silent = [staged(10, 89.9), commit(10, 91.0), staged(20, 99.7)]
    r = judge(silent, phase="staged")
    assert r.verdict == "inconclusive" and "does not report its writers' begins" in r.reason, r.reason
    # No earlier staged save committed: nothing shows the workload reports a begin either.
    r = judge([staged(20, 99.7)], phase="staged")
    assert r.verdict == "inconclusive" and "does not report its writers' begins" in r.reason, r.reason
    # One earlier staged save committed without a begin: the workload does not report every writer's begin.
    partly = [staged(5, 84.9)] + save(5, 85.0, 86.0) + silent
    assert judge(partly, phase="staged").verdict == "inconclusive"
    # A begin of another attempt's save of the same step does not vouch for this one.
    other = [staged(10, 89.9)] + save(10, 90.0, attempt="0.1") + [commit(10, 91.0), staged(20, 99.7)]
    assert judge(other, phase="staged").verdict == "inconclusive"
    # The same run with its writers' begins reported: the kill struck before the step-20 writer began.
    told = [staged(10, 89.9)] + save(10, 90.0, 91.0) + [staged(20, 99.7)]
    assert judge(told, phase="staged").verdict == "pass"
    # An earlier attempt's committed staged saves show it too (the same workload), when they came before the kill.
    earlier = [staged(10, 80.9, attempt="0.0")] + save(10, 81.0, 82.0, attempt="0.0") + [staged(20, 99.7, "0.1")]
    assert judge(earlier, fault=kill(attempt="0.1"), phase="staged").verdict == "pass"


def step(n: int, t: float, rank: int, attempt: str = "0.0") -> dict:
    return {"ev": "step", "t": t, "attempt": attempt, "rank": rank, "step": n, "epoch": 0, "samples": [], "loss": 1.0}


def test_phase_staged_a_stack_that_stages_on_rank_0_alone_is_struck_through_any_rank() -> None:
    """Issue 56 item 8: Lightning's strategy saves on global rank 0 only, so only rank 0 reports ckpt_staged. A kill of
    rank 1 after rank 0 staged takes the job down, rank 0's staged copy with it; only where every save is seen to be
    staged by rank 0 alone, while rank 1 trained on past it, is rank 1's missing staging the stack's way."""
    struck_1 = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=100.0,
                           details={"ranks": [1], "pids": [12], "attempt": "0.0"})
    lightning = ([step(10, 89.0, 0), step(10, 89.0, 1), staged(10, 89.9)] + save(10, 90.0, 91.0)
                 + [step(11, 91.5, 0), step(11, 91.5, 1), step(20, 99.0, 0), step(20, 99.0, 1), staged(20, 99.7)])
    r = judge(lightning, fault=struck_1, phase="staged")
    assert r.verdict == "pass", r.reason
    # The struck save is the first: nothing shows rank 1 never stages; it may simply not have staged it yet.
    first = [step(20, 99.0, 0), step(20, 99.0, 1), staged(20, 99.7)]
    r = judge([*save(5, 80.0, 81.0), *first], fault=struck_1, phase="staged")
    assert r.verdict == "fail" and "rank(s) [1] it struck had not staged" in r.reason, r.reason
    # Rank 1 staged an earlier save itself: the workload stages on every rank, and it had not staged this one.
    both = lightning[:3] + [staged(10, 89.9, rank=1)] + lightning[3:]
    r = judge(both, fault=struck_1, phase="staged")
    assert r.verdict == "fail" and "rank(s) [1] it struck had not staged" in r.reason, r.reason
    # Rank 1 never trained past the earlier save: no sign it would have staged it.
    quiet = [r for r in lightning if not (r["ev"] == "step" and r["rank"] == 1 and r["step"] > 10)]
    r = judge(quiet, fault=struck_1, phase="staged")
    assert r.verdict == "fail" and "rank(s) [1] it struck had not staged" in r.reason, r.reason
