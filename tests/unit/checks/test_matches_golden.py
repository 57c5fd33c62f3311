"""matches_golden against a fake golden summary: bit-exact digests, loss tolerance across world sizes, errors."""

from __future__ import annotations

from chaos.checks.base import CheckResult
from chaos.checks.matches_golden import MatchesGolden, MatchesGoldenConfig
from chaos.errors import HarnessError


def golden(world=2, digest="a" * 64, loss=0.5, step=8):
    return {"ranks": {str(r): {"digest": digest, "step": step} for r in range(world)},
            "world_size": world, "final_step": step, "final_loss": loss, "run_dir": "/runs/g"}


def finished(sim, world=2, digests=None, steps=8):
    from histsim import Cursor

    sim.start("0.0", world=world)
    sim.train("0.0", 1, steps, Cursor(16))
    sim.final("0.0", steps, digests or {r: "a" * 64 for r in range(world)})


def judge(sim, outcome_of, summary, **config) -> CheckResult:
    return MatchesGolden(MatchesGoldenConfig(**config)).evaluate(outcome_of(sim.history(), golden=lambda: summary))


def test_same_world_size_identical_digests_pass(sim, outcome_of):
    finished(sim)
    result = judge(sim, outcome_of, golden())
    assert result.verdict == "pass", result.reason
    assert result.figures["comparison"] == "digest"
    assert "bit-identical" in result.reason


def test_one_differing_rank_fails_and_is_named(sim, outcome_of):
    finished(sim, digests={0: "a" * 64, 1: "b" * 64})
    result = judge(sim, outcome_of, golden())
    assert result.verdict == "fail"
    assert "1 of 2 ranks: rank 1 bbbbbbbbbbbb != golden aaaaaaaaaaaa" in result.reason
    assert result.figures["mismatched_ranks"] == ["rank 1 bbbbbbbbbbbb != golden aaaaaaaaaaaa"]


def test_changed_world_size_compares_the_loss(sim, outcome_of):
    finished(sim, world=1, digests={0: "c" * 64})   # the synthetic loss at step 8 is 1/8
    # Issue 32 item 7: one final loss within tolerance is weak evidence; it passes only by name.
    result = judge(sim, outcome_of, golden(world=2, loss=0.125 * 1.02))
    assert result.verdict == "inconclusive", result.reason
    assert "does not prove the resume" in result.reason and "world_size_change: final_loss" in result.reason
    result = judge(sim, outcome_of, golden(world=2, loss=0.125 * 1.02), world_size_change="final_loss")
    assert result.verdict == "pass", result.reason
    assert result.figures["comparison"] == "loss"
    assert "compared losses because the world size 1 vs golden 2" in result.reason
    assert "the weaker standard this experiment opted into" in result.reason
    # Outside the tolerance is a proven FAIL under either standard.
    for standard in ("inconclusive", "final_loss"):
        result = judge(sim, outcome_of, golden(world=2, loss=0.125 * 1.02), loss_rtol=0.01,
                       world_size_change=standard)
        assert result.verdict == "fail"


def test_a_failed_golden_run_is_an_error_with_its_reason(sim, outcome_of):
    finished(sim)

    def broken():
        raise HarnessError("the fault-free golden run failed (exit 1, timed out: False)")

    result = MatchesGolden(MatchesGoldenConfig()).evaluate(outcome_of(sim.history(), golden=broken))
    assert result.verdict == "error"
    assert "golden run failed (exit 1" in result.reason


def test_a_run_without_final_events_fails(sim, outcome_of):
    from histsim import Cursor

    sim.start("0.0")
    sim.train("0.0", 1, 3, Cursor(16))
    result = judge(sim, outcome_of, golden())
    assert result.verdict == "fail" and "no final event" in result.reason


def test_without_a_golden_provider_it_is_an_error(sim, outcome_of):
    finished(sim)
    result = MatchesGolden(MatchesGoldenConfig()).evaluate(outcome_of(sim.history()))
    assert result.verdict == "error" and "golden=Golden" in result.reason


def test_no_digest_on_either_side_is_not_a_match(sim, outcome_of):
    finished(sim, digests={0: None, 1: None})
    result = judge(sim, outcome_of, golden(digest=None))
    assert result.verdict == "inconclusive" and "carries no digest" in result.reason


def test_ending_at_another_step_fails_even_with_equal_digests(sim, outcome_of):
    finished(sim, steps=6)
    result = judge(sim, outcome_of, golden(step=8))
    assert result.verdict == "fail" and "ended at step 6, the fault-free run at step 8" in result.reason


def test_the_world_size_is_the_final_attempts(sim, outcome_of):
    from histsim import Cursor

    # 0.0 ran with 4 ranks, the job ended with 2 after a relaunch: compare with a 2-rank golden bit-exactly.
    sim.start("0.0", world=4)
    sim.train("0.0", 1, 3, Cursor(16))
    sim.final("0.0", 3)
    sim.start("1.0", world=2)
    sim.train("1.0", 1, 8, Cursor(16))
    sim.final("1.0", 8)
    result = judge(sim, outcome_of, golden(world=2))
    assert result.figures["world_size"] == 2 and result.figures["comparison"] == "digest", result
