"""exactly_once over synthetic histories: clean resumes pass; duplicates, gaps and broken lineages fail."""

from __future__ import annotations

from chaos.checks.exactly_once import ExactlyOnce, ExactlyOnceConfig


def judge(sim, outcome_of, **config):
    return ExactlyOnce(ExactlyOnceConfig(**config)).evaluate(outcome_of(sim.history()))


def killed_at_8_resumed_from_6(sim, cursor_fix=None):
    """0.0 commits every 3 steps and dies after step 8; 0.1 loads step 6 and runs to 20."""
    sim.start("0.0")
    sim.train("0.0", 1, 8, sim.resume(0) if 0 in sim.saved else _fresh(sim), ckpt_every=3)
    sim.start("0.1", load=6, path="/ckpt/step_000006")
    cursor = sim.resume(6)
    if cursor_fix:
        cursor_fix(cursor)
    sim.train("0.1", 7, 20, cursor, ckpt_every=3)
    sim.final("0.1", 20)


def _fresh(sim):
    from histsim import Cursor

    return Cursor(sim.dataset_size)


def test_fault_free_run_passes(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 10, _fresh(sim), ckpt_every=5)
    sim.final("0.0", 10)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert result.figures["completed_epochs"] == [0, 1]
    assert result.figures["partial_epoch"] == 2 and result.figures["partial_epoch_seen"] == 8
    assert result.figures["replayed"]["count"] == 0


def test_clean_resume_passes_and_reports_the_rolled_back_steps_as_replayed(sim, outcome_of):
    killed_at_8_resumed_from_6(sim)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert [(link["segment"], link["resumed_from"], link["kept_until"]) for link in result.figures["lineage"]] \
        == [("0.0", 0, 6), ("0.1", 6, None)]
    # Steps 7 and 8 of attempt 0.0 ran (4 samples each) and were discarded by the resume from step 6.
    replayed = result.figures["replayed"]
    assert replayed["count"] == 8
    assert {s for item in replayed["first"] for s in item["steps"]} <= {"0.0:7", "0.0:8"}
    assert "8 replayed" in result.reason and "0.0(0..6] -> 0.1(6..end]" in result.reason


def test_sampler_that_restarts_the_epoch_on_resume_fails_with_duplicates(sim, outcome_of):
    # Step 6 ends in the middle of epoch 1 (offset 8 of 16); the broken sampler goes back to offset 0.
    killed_at_8_resumed_from_6(sim, cursor_fix=lambda c: setattr(c, "offset", 0))
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert result.reason.startswith("8 duplicated")
    first = result.figures["duplicated"]["first"][0]
    assert first["epoch"] == 1 and len(first["steps"]) == 2
    assert first["steps"][0].startswith("0.0:") and first["steps"][1].startswith("0.1:")


def test_sampler_that_skips_a_batch_on_resume_fails_with_gaps(sim, outcome_of):
    killed_at_8_resumed_from_6(sim, cursor_fix=lambda c: setattr(c, "offset", c.offset + 4))
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert result.figures["missing"]["count"] == 4
    assert result.figures["duplicated"]["count"] == 0
    assert {m["epoch"] for m in result.figures["missing"]["first"]} == {1}
    assert "4 missing" in result.reason


def test_a_skipped_batch_in_the_partial_last_epoch_is_found_through_the_rolled_back_steps(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 7, _fresh(sim), ckpt_every=5)   # epoch 1 = steps 5..8; killed after step 7
    sim.start("0.1", load=5)
    cursor = sim.resume(5)
    cursor.offset += 4                                    # skips what step 6 consumed
    sim.train("0.1", 6, 7, cursor)
    sim.final("0.1", 7)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail", result.reason
    assert result.figures["missing"]["count"] == 4
    assert all(m["rolled_back_at"] == "0.0:6" for m in result.figures["missing"]["first"])
    assert "never consumed again" in result.reason
    # A sampler documented to reshuffle on resume opts out of that inference.
    assert judge(sim, outcome_of, deterministic_order=False).verdict == "pass"


def test_resume_from_a_step_nobody_committed_fails_naming_the_attempt(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 8, _fresh(sim), ckpt_every=3)
    sim.start("0.1", load=7)
    sim.train("0.1", 8, 10, sim.resume(6))
    sim.final("0.1", 10)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "attempt 0.1 resumed from step 7 which no attempt committed" in result.reason


def test_a_commit_after_the_load_does_not_count(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 8, _fresh(sim), ckpt_every=3)
    sim.start("0.1", load=9)
    sim.train("0.1", 10, 12, _fresh(sim))
    sim.commit("0.1", 9)
    sim.final("0.1", 12)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "resumed from step 9 which no attempt committed; attempt 0.1 committed it only afterwards" in result.reason


def test_world_size_change_on_resume_passes(sim, outcome_of):
    sim.start("0.0", world=2)
    sim.train("0.0", 1, 7, _fresh(sim), ckpt_every=3)
    sim.start("0.1", world=1, load=6)
    sim.train("0.1", 7, 30, sim.resume(6))              # 2 samples per step now
    sim.final("0.1", 30)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert result.figures["completed_epochs"] == [0, 1, 2, 3]
    assert result.figures["partial_epoch_seen"] == 8


def test_multiple_restarts_chain_the_lineage_through_the_latest_commit(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 7, _fresh(sim), ckpt_every=3)   # commits 3, 6
    sim.start("0.1", load=3)                             # say step 6 was found corrupt
    sim.train("0.1", 4, 10, sim.resume(3), ckpt_every=3)  # commits 6 again, and 9
    sim.start("0.2", load=6)
    sim.train("0.2", 7, 8, sim.resume(6))               # dies without committing
    sim.start("0.3", load=6)
    sim.train("0.3", 7, 20, sim.resume(6))
    sim.final("0.3", 20)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    chain = [(link["segment"], link["resumed_from"], link["kept_until"]) for link in result.figures["lineage"]]
    assert chain == [("0.0", 0, 3), ("0.1", 3, 6), ("0.3", 6, None)]
    # Rolled back: 0.0's steps 4..7, 0.1's 7..10, all of 0.2.
    assert result.figures["replayed"]["count"] == (4 + 4 + 2) * 4


def test_a_step_recorded_twice_in_the_kept_history_fails(sim, outcome_of):
    sim.start("0.0")
    cursor = sim.train("0.0", 1, 4, _fresh(sim))
    sim.emit("step", "0.0", 0, step=4, epoch=1, samples=[], loss=0.5)
    sim.train("0.0", 5, 8, cursor)
    sim.final("0.0", 8)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "recorded twice" in result.reason and "4 (attempt 0.0, rank 0)" in result.reason


def test_ranks_that_resume_from_different_steps_fail(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 7, _fresh(sim), ckpt_every=3)
    sim.world["0.1"] = 2
    sim.emit("start", "0.1", 0, dataset_size=16)
    sim.emit("start", "0.1", 1, dataset_size=16)
    sim.emit("ckpt_load", "0.1", 0, step=6, path="/ckpt/step_000006")
    sim.emit("ckpt_load", "0.1", 1, step=3, path="/ckpt/step_000003")
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "ranks of attempt 0.1 resumed from different checkpoints (rank 0: step 6, rank 1: step 3)" in result.reason


def test_in_process_rollback_splits_the_attempt(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 7, _fresh(sim), ckpt_every=3)
    sim.load("0.0", 6, "/ckpt/step_000006")             # e.g. a NaN loss at step 7: roll back in-process
    sim.train("0.0", 7, 12, sim.resume(6))
    sim.final("0.0", 12)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert [link["segment"] for link in result.figures["lineage"]] == ["0.0", "0.0#1"]
    assert result.figures["replayed"]["count"] == 4


def test_workload_without_ckpt_load_events_infers_the_resume_point(outcome_of):
    from histsim import Sim

    sim = Sim()
    sim.start("0.0", load=None)
    sim.train("0.0", 1, 5, _fresh(sim), ckpt_every=3)
    sim.start("0.1", load=None)
    sim.train("0.1", 4, 8, sim.resume(3))
    sim.final("0.1", 8)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert any("implies it resumed from step 3" in n for n in result.figures["notes"])


def test_indices_outside_the_dataset_fail(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 2, _fresh(sim))
    sim.emit("step", "0.0", 0, step=3, epoch=0, samples=[99], loss=0.1)
    sim.final("0.0", 3)
    result = judge(sim, outcome_of)
    assert result.verdict == "fail"
    assert "outside 0..15" in result.reason


def test_drop_last_tolerance(sim, outcome_of):
    sim.start("0.0")
    cursor = _fresh(sim)
    for step in range(1, 7):
        epoch, batch = cursor.take(4)
        if step == 4:       # a drop_last sampler leaves the epoch's tail out
            continue
        sim.emit("step", "0.0", 0, step=step, epoch=epoch, samples=batch, loss=0.1)
    sim.final("0.0", 6)
    assert judge(sim, outcome_of).verdict == "fail"
    assert judge(sim, outcome_of, max_missing_per_epoch=4).verdict == "pass"


def test_skips_without_dataset_size_or_samples(outcome_of):
    from histsim import Sim

    sim = Sim(dataset_size=None)
    sim.start("0.0")
    sim.train("0.0", 1, 3, _fresh(Sim()))
    result = judge(sim, outcome_of)
    assert result.verdict == "inconclusive" and "dataset_size" in result.reason

    sim = Sim()
    sim.start("0.0")
    sim.emit("step", "0.0", 0, step=1, epoch=0, loss=0.1)
    result = judge(sim, outcome_of)
    assert result.verdict == "inconclusive" and "samples" in result.reason


def test_an_unfinished_run_is_judged_up_to_its_last_step_and_says_so(sim, outcome_of):
    sim.start("0.0")
    sim.train("0.0", 1, 6, _fresh(sim), ckpt_every=3)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert "no attempt wrote a final event: judged up to the last step of attempt 0.0" in result.reason



def test_a_commit_killed_before_its_event_is_inferred_from_ckpt_begin(sim, outcome_of):
    # Rank 0 made step 8 durable and died before writing ckpt_commit: the resume from it is right,
    # and the lineage names the attempt that was saving it instead of failing the run.
    sim.start("0.0")
    sim.train("0.0", 1, 8, _fresh(sim), ckpt_every=4)
    sim.records = [r for r in sim.records if not (r["ev"] == "ckpt_commit" and r["step"] == 8)]
    sim.start("0.1", load=8)
    sim.train("0.1", 9, 12, sim.resume(8), ckpt_every=4)
    sim.final("0.1", 12)
    result = judge(sim, outcome_of)
    assert result.verdict == "pass", result.reason
    assert "step 8 loaded by attempt 0.1 was never announced with ckpt_commit" in result.reason
