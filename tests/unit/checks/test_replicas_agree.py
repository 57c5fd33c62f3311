"""replicas_agree: every rank of the final attempt ends with the same digest."""

from __future__ import annotations

from chaos.checks.base import CheckConfig
from chaos.checks.replicas_agree import ReplicasAgree


def judge(sim, outcome_of):
    return ReplicasAgree(CheckConfig()).evaluate(outcome_of(sim.history()))


def test_equal_digests_pass(sim, outcome_of):
    sim.start("0.0")
    sim.final("0.0", 5, {0: "a" * 64, 1: "a" * 64})
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert "all 2 ranks of attempt 0.0" in result.reason


def test_different_digests_fail_with_the_groups(sim, outcome_of):
    sim.start("0.0")
    sim.final("0.0", 5, {0: "a" * 64, 1: "b" * 64})
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "2 different digests (ranks 0: aaaaaaaaaaaa; ranks 1: bbbbbbbbbbbb)" in result.reason


def test_only_the_final_attempt_counts(sim, outcome_of):
    sim.start("0.0")
    sim.final("0.0", 5, {0: "a" * 64, 1: "b" * 64})
    sim.start("0.1")
    sim.final("0.1", 5, {0: "c" * 64, 1: "c" * 64})
    assert judge(sim, outcome_of).verdict == "pass"


def test_a_rank_without_a_final_event_fails(sim, outcome_of):
    sim.start("0.0")
    sim.emit("final", "0.0", 0, step=5, digest="a" * 64)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail" and "rank(s) 1 of 2 wrote no final event" in result.reason


def test_no_final_event_at_all_fails(sim, outcome_of):
    sim.start("0.0")
    assert judge(sim, outcome_of).verdict == "fail"


def test_missing_digests_prove_nothing(sim, outcome_of):
    sim.start("0.0")
    sim.final("0.0", 5, {0: None, 1: None})
    result = judge(sim, outcome_of)
    assert result.verdict == "inconclusive" and "carries no digest" in result.reason
