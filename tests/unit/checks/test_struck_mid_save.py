"""struck_mid_save: only a kill that lands inside a save which then never commits is a torn save."""

from __future__ import annotations

from histsim import make_outcome

from chaos.checks.struck_mid_save import StruckMidSave, StruckMidSaveConfig
from chaos.events import History
from chaos.outcome import FaultRecord


def kill(t: float = 100.0, attempt: str = "0.0") -> FaultRecord:
    return FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=t,
                       details={"ranks": [0], "pids": [11], "attempt": attempt})


def save(step: int, begin: float, commit: float | None = None, attempt: str = "0.0") -> list[dict]:
    out = [{"ev": "ckpt_begin", "t": begin, "attempt": attempt, "rank": 0, "step": step, "path": f"/c/{step}"}]
    if commit is not None:
        out.append({"ev": "ckpt_commit", "t": commit, "attempt": attempt, "rank": 0, "step": step,
                    "path": f"/c/{step}", "bytes": 10, "seconds": commit - begin})
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
