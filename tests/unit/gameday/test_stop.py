"""Stop rules end a game day with the figures that broke them."""

from chaos.spec.gameday import StopConfig
from chaos.gameday.stop import StopRules


def test_no_progress_counts_from_the_last_new_step() -> None:
    rules = StopRules(StopConfig(no_progress_s=10))
    assert rules(5.0, 3, 1) is None
    assert rules(14.0, 3, 1) is None  # 9 s since step 3
    reason = rules(15.5, 3, 2)
    assert reason is not None and "no progress for 10 s" in reason and "step 3 at 5 s" in reason


def test_a_step_redone_after_a_restart_is_not_progress() -> None:
    rules = StopRules(StopConfig(no_progress_s=10))
    rules(1.0, 20, 1)
    assert rules(8.0, 15, 2) is None
    assert rules(11.5, 19, 2) is not None


def test_too_many_restarts() -> None:
    rules = StopRules(StopConfig(no_progress_s=None, max_restarts=2))
    assert rules(1.0, 1, 3) is None
    assert "3 restarts (limit max_restarts 2)" in (rules(2.0, 2, 4) or "")
