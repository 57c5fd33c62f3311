"""fault_mix: a game day passes only when its drawn faults really struck; goodput refuses a run it cannot split."""

from __future__ import annotations

from types import SimpleNamespace

from histsim import make_outcome

from chaos.checks.fault_mix import FaultMix, FaultMixConfig
from chaos.checks.goodput import GoodputCheck, GoodputConfig
from chaos.evidence.events import History
from chaos.spec.gameday import Scheduled
from chaos.evidence.outcome import FaultRecord, judge_faults


def scheduled(label: str, category: str) -> Scheduled:
    return Scheduled(at_s=10.0, real_h=1.0, cause="Software Bug", category=category, fault={"name": label}, why="")


def outcome(faults: list[FaultRecord], schedule: list[Scheduled] | None, gameday: bool = True):
    o = make_outcome(History([]), faults=faults)
    o.experiment = SimpleNamespace(schedule=schedule or [], gameday=object() if gameday else None, name="gd")
    return o


def rec(label: str, status: str = "injected", error: str | None = None, regain: float | None = 4.0) -> FaultRecord:
    return FaultRecord(index=0, kind="kill-rank", label=label, t_inject=1.0 if status == "injected" else None,
                       status=status, error=error, optional=True, recovery={"regain_s": regain})


def judge(o):
    return FaultMix(FaultMixConfig()).evaluate(o)


def test_every_drawn_fault_struck() -> None:
    r = judge(outcome([rec("software#1"), rec("gpu#2", regain=6.0)],
                      [scheduled("software#1", "software"), scheduled("gpu#2", "gpu")]))
    assert r.verdict == "pass" and "2 of 2" in r.reason
    assert r.figures["categories"]["gpu"] == {"scheduled": 1, "injected": 1, "not_reached": 0, "failed": 0,
                                              "mttr_s": 6.0}


def test_a_game_day_in_which_nothing_fired_proved_nothing() -> None:
    r = judge(outcome([rec("software#1", status="never_fired")], [scheduled("software#1", "software")]))
    assert r.verdict == "inconclusive" and "tested nothing" in r.reason


def test_a_fault_that_failed_to_inject_fails_even_though_optional() -> None:
    faults = [rec("software#1"), rec("gpu#2", status="failed", error="no rank alive")]
    r = judge(outcome(faults, [scheduled("software#1", "software"), scheduled("gpu#2", "gpu")]))
    assert r.verdict == "fail" and "no rank alive" in r.reason
    [verdict] = judge_faults(faults, 10)  # and the run's own fault verdict says so too
    assert verdict.verdict == "fail" and "gpu#2 failed to inject" in verdict.reason


def test_a_drawn_fault_with_no_record_fails() -> None:
    r = judge(outcome([rec("software#1")], [scheduled("software#1", "software"), scheduled("gpu#2", "gpu")]))
    assert r.verdict == "fail" and "gpu#2" in r.reason


def test_no_game_day_or_an_empty_draw_is_not_a_pass() -> None:
    assert judge(outcome([], [], gameday=False)).verdict == "inconclusive"
    assert judge(outcome([], [])).verdict == "inconclusive"


def test_goodput_refuses_an_empty_history() -> None:
    r = GoodputCheck(GoodputConfig(min=0.5)).evaluate(make_outcome(History([])))
    assert r.verdict == "inconclusive" and "wall time is unknown" in r.reason


def test_goodput_below_its_bound_fails_with_the_split() -> None:
    records = [{"ev": "launch", "t": 0.0}, {"ev": "start", "t": 8.0, "attempt": "0.0", "rank": 0}]
    records += [{"ev": "step", "t": 9.0 + i, "attempt": "0.0", "rank": 0, "step": i + 1} for i in range(6)]
    records += [{"ev": "final", "t": 14.5, "attempt": "0.0", "rank": 0, "step": 6}, {"ev": "exit", "t": 15.0, "code": 0}]
    r = GoodputCheck(GoodputConfig(min=0.5)).evaluate(make_outcome(History(records)))
    assert r.verdict == "fail" and "goodput 40.0% of 15.0 s" in r.reason and "startup 8.0 s" in r.reason
    assert r.figures["seconds"]["productive"] == 6.0


def test_faults_not_reached_because_the_run_broke_are_not_a_pass() -> None:
    schedule = [scheduled("software#1", "software"), scheduled("gpu#2", "gpu")]
    faults = [rec("software#1"), rec("gpu#2", status="never_fired")]
    broke = outcome(faults, schedule)
    broke.exit_code = None
    r = judge(broke)
    assert r.verdict == "inconclusive" and "mix was not played out" in r.reason
    finished = outcome(faults, schedule)
    finished.history = History([{"ev": "final", "t": 9.0, "attempt": "0.0", "rank": 0, "step": 10}])
    r = judge(finished)
    assert r.verdict == "pass" and "came due after the workload had finished" in r.reason
