"""The XID policy table and the degrading-rate escalation (fake clock)."""

import pytest

from chaos.health.policy import TABLE, Action, Policy, classify


@pytest.mark.parametrize("code", [13, 31, 43])
def test_application_codes_restart(code: int) -> None:
    assert classify(code).action is Action.RESTART


@pytest.mark.parametrize("code", [48, 64, 74, 79, 94, 119])
def test_hardware_codes_exclude(code: int) -> None:
    assert classify(code).action is Action.EXCLUDE


def test_the_table_has_every_code_from_the_seeds() -> None:
    assert sorted(TABLE) == [13, 31, 43, 48, 63, 64, 74, 79, 92, 94, 119]


def test_unknown_code_is_ignored_not_guessed() -> None:
    assert classify(999).action is Action.IGNORE


def test_repeated_92_escalates_from_alert_to_checkpoint_within_the_window() -> None:
    now = [0.0]
    policy = Policy(degrading_count=3, window_s=60, clock=lambda: now[0])
    actions = []
    for t in (0, 10, 20, 30):
        now[0] = t
        actions.append(policy.decide(92, 0).action)
    assert actions == [Action.ALERT, Action.ALERT, Action.CHECKPOINT, Action.CHECKPOINT]


def test_reports_outside_the_window_do_not_count_and_devices_are_separate() -> None:
    now = [0.0]
    policy = Policy(degrading_count=2, window_s=60, clock=lambda: now[0])
    assert policy.decide(63, 0).action is Action.ALERT
    assert policy.decide(63, 1).action is Action.ALERT  # another card
    now[0] = 100.0
    assert policy.decide(63, 0).action is Action.ALERT  # the first report aged out
    assert policy.decide(63, 0).action is Action.CHECKPOINT


def test_exclude_after_takes_a_degrading_card_out() -> None:
    policy = Policy(degrading_count=2, exclude_after=3, clock=lambda: 0.0)
    assert [policy.decide(92, 2).action for _ in range(3)] == [Action.ALERT, Action.CHECKPOINT, Action.EXCLUDE]


def test_exclude_after_below_degrading_count_is_refused() -> None:
    with pytest.raises(ValueError, match="exclude_after"):
        Policy(degrading_count=3, exclude_after=2)
