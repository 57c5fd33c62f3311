"""The detection check on faults inside the step: caught by a health event naming the class or an abort, within
max_s and max_steps of where it acted, with no rank left waiting (the lies of the nan scenario are in mutations.py)."""

from __future__ import annotations

import copy

from truth import Params, play

from chaos.checks.detection import Detection, DetectionConfig

NAN = Params(scenario="nan", fault_at=5)


def judge(truth, **config):  # type: ignore[no-untyped-def]
    return Detection(DetectionConfig(**{"max_s": 30, **config})).evaluate(truth.outcome())


def test_the_guard_catching_the_nan_in_its_step_passes_with_its_figures() -> None:
    result = judge(play(NAN), max_steps=0)
    assert result.verdict == "pass", result.reason
    assert result.figures["detect_steps"] == {"nan#0": 0} and result.figures["settled_s"]["nan#0"] < 30


def test_an_oom_is_named_by_its_own_class_only() -> None:
    """A health event of code oom answers an oom fault; the guard's nonfinite does not."""
    t = play(NAN)
    lie = copy.deepcopy(t)
    for f in lie.faults:
        f.details["named_by"] = ["oom"]
    # The guard's nonfinite event no longer names the fault; the abort of the attempt still does, in the same step.
    result = judge(lie, max_steps=0)
    assert result.verdict == "pass" and "worker_exit" in lie.outcome().injected_faults[0].recovery["evidence"]["detect_s"]


def test_a_rank_that_never_left_is_left_waiting() -> None:
    """Rank 0 of the struck attempt never exited nor trained past the step: a failure, whatever the bound."""
    t = play(NAN)
    lie = copy.deepcopy(t)
    doomed = next(r for r in lie.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0" and r["rank"] == 0)
    lie.records.remove(doomed)
    result = judge(lie, max_s=3600)
    assert result.verdict == "fail" and "left waiting" in result.reason and "rank(s) 0" in result.reason


def test_no_worker_seen_is_not_proof_that_nobody_waited() -> None:
    t = play(NAN)
    lie = copy.deepcopy(t)
    lie.records = [r for r in lie.records if r.get("ev") not in ("worker_spawn", "worker_exit")]
    result = judge(lie)
    assert result.verdict != "pass"


def test_a_health_event_claiming_an_earlier_step_cannot_take_trained_steps_back() -> None:
    """The guard caught the NaN two steps late but its event names the step the fault acted in: the attempt had
    already reported the poisoned steps, so the detection step is the later one."""
    lie = play(NAN, guard_lag=2)
    acted = next(r for r in lie.records if r.get("ev") == "instep")["step"]
    for r in lie.records:
        if r.get("ev") == "health":
            r["step"] = acted
    result = judge(lie, max_steps=0)
    assert result.verdict == "fail" and result.figures["detect_steps"]["nan#0"] == 2, result.reason


def test_a_journal_without_named_by_credits_no_event() -> None:
    t = play(NAN, guard_lag=None)
    for f in t.faults:
        f.details.pop("named_by")
    t.records.append({"ev": "health", "t": 1003.0, "mono": 1003.0, "pid": 4000, "host": "h", "rank": 0,
                      "world_size": 2, "attempt": "0.0", "source": "straggler", "code": "slow_rank", "device": 0,
                      "action": "alert"})
    t.records.sort(key=lambda r: r["t"])
    assert judge(t).verdict == "inconclusive"
    for bad in (None, [None], "nonfinite"):
        for f in t.faults:
            f.details["named_by"] = bad
        assert judge(t).verdict == "inconclusive"


def test_a_later_faults_health_event_is_not_credited_to_an_earlier_one() -> None:
    """nan#0 is never caught; a second fault comes later and the guard names that one: not nan#0's detection."""
    from chaos.evidence.outcome import FaultRecord

    t = play(NAN, guard_lag=None)
    act = next(r for r in t.records if r.get("ev") == "instep")
    later = act["t"] + 2.0
    t.faults.append(FaultRecord(1, "nan", "nan#1", later, details={"where": "loss", "ranks": [1], "steps": 1,
                                                                   "named_by": ["nonfinite", "nan"]}))
    t.records.append({"ev": "health", "t": later + 0.2, "mono": later + 0.2, "pid": 4001, "host": "h", "rank": 1,
                      "world_size": 2, "attempt": "0.0", "source": "guard", "code": "nonfinite", "device": 1,
                      "action": "restart", "step": act["step"] + 3})
    t.records.sort(key=lambda r: r["t"])
    result = judge(t, faults=["nan"])
    assert result.verdict == "fail" and "nan#0 was never caught" in result.reason


def test_every_worker_is_settled_on_its_own_even_without_a_rank_name() -> None:
    """Two workers the harness could not name (rank None): one exits, the other never does. The one that left
    must not vouch for the one still waiting, and a late exit is not hidden behind an early one."""
    t = play(NAN)
    lie = copy.deepcopy(t)
    for r in lie.records:
        if r.get("ev") in ("worker_spawn", "worker_exit") and r.get("attempt") == "0.0":
            r["rank"] = None
    doomed = [r for r in lie.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0"]
    lie.records.remove(doomed[-1])
    result = judge(lie, max_s=3600)
    assert result.verdict == "fail" and "left waiting" in result.reason
    late = copy.deepcopy(t)
    for r in late.records:
        if r.get("ev") in ("worker_spawn", "worker_exit") and r.get("attempt") == "0.0":
            r["rank"] = None
    first = [r for r in late.records if r.get("ev") == "worker_exit" and r.get("attempt") == "0.0"][0]
    first["t"] += 100.0  # the first worker the harness saw spawn is the one that left late
    late.records.sort(key=lambda r: r["t"])
    assert judge(late, max_s=30).verdict == "fail"


def test_the_evidence_knows_every_fault_that_acts_inside_the_step() -> None:
    """chaos.evidence.in_step.KINDS (the evidence layer cannot import the faults) is the registry's in-step faults."""
    from chaos.evidence.in_step import KINDS
    from chaos.registry import FAULTS

    assert set(KINDS) == {kind for kind in FAULTS.kinds() if getattr(FAULTS.get(kind), "in_step", False)}
