"""rolled_back and no_corrupt_commit on simulated in-step runs: each verdict for the reason it gives.

(The lies they must refuse are in mutations.py: nan_trained_on, nan_resumed_from_poisoned,
nan_landing_unreported, nan_landing_claimed_late, commit_nonfinite, commit_unscanned, ...)"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from mutations import _copy, _looks, _of, verdict_of  # noqa: E402
from truth import Params, play  # noqa: E402


def test_a_guarded_nan_run_is_proven_rolled_back_and_clean() -> None:
    truth = play(Params(scenario="nan", fault_at=6))
    result = verdict_of("rolled_back", {}, truth)
    assert result.verdict == "pass", result.reason
    assert "acted in step 7 of attempt 0.0" in result.reason and "attempt(s) 0.1 trained steps 7-12" in result.reason
    assert result.figures["nan#0"]["armed_at_step"] == 6
    clean = verdict_of("no_corrupt_commit", {}, truth)
    assert clean.verdict == "pass" and "all 3 committed checkpoint(s)" in clean.reason, clean.reason


def test_without_an_in_step_fault_there_is_nothing_to_roll_back() -> None:
    result = verdict_of("rolled_back", {}, play(Params()))
    assert result.verdict == "inconclusive" and "no transient in-step fault" in result.reason


def test_a_persistent_fault_cannot_be_outrun_by_a_rollback() -> None:
    truth = _copy(play(Params(scenario="nan", fault_at=6)))
    truth.faults[0].details["steps"] = None
    result = verdict_of("rolled_back", {}, truth)
    assert result.verdict == "inconclusive" and "act on every step until reverted" in result.reason


def test_a_poisoned_commit_is_named_with_its_step_and_tensors() -> None:
    truth = play(Params(scenario="nan", fault_at=5), guard_lag=4)
    result = verdict_of("no_corrupt_commit", {}, truth)
    assert result.verdict == "fail", result.reason
    assert "committed at step 8" in result.reason and "600 non-finite" in result.reason
    back = verdict_of("rolled_back", {}, truth)
    assert back.verdict == "fail" and "steps 6-" in back.reason and "of attempt 0.0" in back.reason


def test_a_run_without_commits_or_scans_proves_nothing_clean() -> None:
    truth = _copy(play(Params()))
    for r in _looks(truth, "ckpt_commit"):
        r.pop("values")
    assert verdict_of("no_corrupt_commit", {}, truth).verdict == "inconclusive"
    none = _copy(play(Params()))
    doomed = {id(r) for r in _of(none, "ckpt_commit")}
    none.records = [r for r in none.records if id(r) not in doomed]
    result = verdict_of("no_corrupt_commit", {}, none)
    assert result.verdict == "inconclusive" and "committed no checkpoint" in result.reason


def test_an_in_process_rollback_is_judged_by_segment_not_by_attempt() -> None:
    """The guard reloads step 4 in the same processes: the replayed steps 5-12 of attempt 0.0 are a new segment
    of it, trained from before the fault, and must not count as computed after it."""
    truth = play(Params(scenario="nan", fault_at=6, rollback="in_process"))
    result = verdict_of("rolled_back", {}, truth)
    assert result.verdict == "pass", result.reason
    assert "acted in step 7 of attempt 0.0" in result.reason and "segment(s) 0.0#1 trained steps 7-12" in result.reason
    assert verdict_of("no_corrupt_commit", {"golden_digests": True}, truth).verdict == "pass"
    assert verdict_of("exactly_once", {}, truth).verdict == "pass"
    assert verdict_of("completes", {"max_restarts": 0, "min_restarts": 0}, truth).verdict == "pass"


def test_an_in_process_reload_of_a_checkpoint_saved_after_the_fault_keeps_its_poison() -> None:
    """The guard lagged two steps past a commit (step 8 saved from the poisoned state) and reloaded that: the
    steps the struck segment computed up to it are kept, and the check names them."""
    truth = play(Params(scenario="nan", fault_at=6, rollback="in_process"), guard_lag=3)
    result = verdict_of("rolled_back", {}, truth)
    assert result.verdict == "fail" and "steps 7-8 of attempt 0.0" in result.reason, result.reason
    assert verdict_of("no_corrupt_commit", {}, truth).verdict == "fail"
