"""Triggers fire when they should, once unless repeating, and combine with | and &; no sleeping."""

from __future__ import annotations

import random

from chaos.triggers.after_s import AfterS, AfterSParams
from chaos.triggers.at_step import AtStep, AtStepParams
from chaos.triggers.base import TriggerState, all_of
from chaos.triggers.before_launch import BeforeLaunch
from chaos.triggers.every_steps import EverySteps, EveryStepsParams
from chaos.triggers.on_event import OnEvent, OnEventParams
from chaos.triggers.poisson import Poisson, PoissonParams


def st(now: float = 0.0, step: int = 0, events: list | None = None, seed: int = 0) -> TriggerState:
    return TriggerState(now=now, step=step, new_events=events or [], rng=random.Random(seed))


def test_at_step_fires_once_at_or_after_the_step() -> None:
    t = AtStep(AtStepParams(at_step=25))
    assert [t(st(step=s)) for s in (10, 24, 26, 30, 25)] == [False, False, True, False, False]


def test_after_s_fires_once() -> None:
    t = AfterS(AfterSParams(after_s=5))
    assert [t(st(now=n)) for n in (0, 4.9, 5.0, 6)] == [False, False, True, False]


def test_before_launch_is_polled_before_the_launch_and_fires_once() -> None:
    t = BeforeLaunch()
    assert t.before_launch and not AfterS(AfterSParams(after_s=0)).before_launch
    assert [t(st()), t(st(now=1.0, step=5))] == [True, False]


def test_every_steps_fires_per_multiple_even_when_steps_jump() -> None:
    t = EverySteps(EveryStepsParams(every_steps=10))
    assert [t(st(step=s)) for s in (9, 10, 11, 35, 36, 40)] == [False, True, False, True, False, True]


def test_on_event_matches_and_counts_once_per_attempt_and_step() -> None:
    t = OnEvent(OnEventParams(on_event="ckpt_commit", nth=2))
    ev = lambda step, rank: {"ev": "ckpt_commit", "step": step, "rank": rank, "attempt": "0.0"}  # noqa: E731
    assert not t(st(events=[ev(10, 0), ev(10, 1), {"ev": "step", "step": 11}]))
    assert t(st(events=[ev(20, 1)]))
    assert not t(st(events=[ev(30, 0)]))
    only_step = OnEvent(OnEventParams(on_event="ckpt_begin", step=20, rank=0))
    assert not only_step(st(events=[{"ev": "ckpt_begin", "step": 20, "rank": 1}]))
    assert only_step(st(events=[{"ev": "ckpt_begin", "step": 20, "rank": 0}]))
    # An asynchronous save's phases: the staging of step 20, once whichever rank reports it first.
    staged = OnEvent(OnEventParams(on_event="ckpt_staged", step=20))
    assert not staged(st(events=[{"ev": "ckpt_staged", "step": 10, "rank": 0, "attempt": "0.0"}]))
    assert staged(st(events=[{"ev": "ckpt_staged", "step": 20, "rank": 1, "attempt": "0.0"}]))
    assert not staged(st(events=[{"ev": "ckpt_staged", "step": 20, "rank": 0, "attempt": "0.0"}]))


def test_poisson_is_seeded_and_repeating() -> None:
    def fire_times(seed: int) -> list[float]:
        t = Poisson(PoissonParams(mean_interval_s=2.0))
        rng = random.Random(seed)
        return [n / 10 for n in range(600) if t(TriggerState(now=n / 10, rng=rng))]

    a, b = fire_times(1), fire_times(1)
    assert a == b and len(a) > 10
    assert fire_times(2) != a


def test_or_and_compose_and_plain_functions_are_triggers() -> None:
    t = AtStep(AtStepParams(at_step=50)) | AfterS(AfterSParams(after_s=3))
    assert not t(st(now=1, step=10)) and t(st(now=3.5, step=11))
    both = all_of(AtStep(AtStepParams(at_step=5)), lambda s: s.now > 10)
    assert not both(st(now=1, step=6)) and not both(st(now=5, step=7)) and both(st(now=11, step=8))
    assert "at_step=50 | after_s=3.0" == t.describe()


def test_in_training_waits_past_its_time_for_the_next_step() -> None:
    from chaos.triggers.in_training import InTraining, InTrainingParams

    t = InTraining(InTrainingParams(after_s=10))
    step = [{"ev": "step", "step": 3}]
    assert not t(st(now=5, events=step))  # training, but not yet due
    assert not t(st(now=11))  # due, but the job is restarting: nothing trained since the last poll
    assert not t(st(now=12, events=[{"ev": "start"}]))
    assert t(st(now=13, events=step))
    assert not t(st(now=14, events=step))  # once


def _group_step(group: int, t: float) -> dict:
    return {"ev": "step", "step": 3, "replica_group": group, "t": t}


def test_in_training_with_groups_waits_until_every_group_stepped_since_the_latest_fault() -> None:
    """A drop-replica game day: the fault due at 10 s waits while rg1 (struck at wall 1000) relaunches; the survivors'
    steps do not release it, nor rg1's own step stamped before the fault and read late; its first step after does."""
    from chaos.triggers.in_training import InTraining, InTrainingParams

    t = InTraining(InTrainingParams(after_s=10, groups=3, groups_wait_s=60))

    def state(now: float, events: list) -> TriggerState:
        s = st(now=now, events=events)
        s.last_inject, s.last_inject_t = 5.0, 1000.0
        return s

    assert not t(state(11, [_group_step(0, 1001), _group_step(2, 1001), _group_step(1, 999.9)]))
    assert not t(state(20, [_group_step(0, 1010), _group_step(2, 1010)]))
    assert t.delay is None
    assert t(state(25, [_group_step(0, 1015), _group_step(1, 1015.2)]))  # rg2 stepped at 1010: all three back
    assert t.delay is not None and t.delay["away"] == ["rg1"] and t.delay["waited_s"] == 15
    assert "rg1" in t.delay["reason"] and "once every group had" in t.delay["reason"]
    assert not t(state(26, [_group_step(1, 1016)]))  # once


def test_in_training_with_groups_strikes_anyway_after_its_longest_wait() -> None:
    """A group that never comes back does not skip the fault: it strikes groups_wait_s past its due time."""
    from chaos.triggers.in_training import InTraining, InTrainingParams

    t = InTraining(InTrainingParams(after_s=10, groups=2, groups_wait_s=30))
    s = st(now=39, events=[_group_step(0, 1030)])
    s.last_inject, s.last_inject_t = 5.0, 1000.0
    assert not t(s)
    s = st(now=40.5, events=[_group_step(0, 1031)])
    s.last_inject, s.last_inject_t = 5.0, 1000.0
    assert t(s)
    assert t.delay is not None and t.delay["away"] == ["rg1"] and "groups_wait_s 30" in t.delay["reason"]


def test_in_training_with_groups_strikes_on_time_when_every_group_trains() -> None:
    from chaos.triggers.in_training import InTraining, InTrainingParams

    t = InTraining(InTrainingParams(after_s=10, groups=2))
    assert not t(st(now=4, events=[_group_step(0, 1004), _group_step(1, 1004)]))  # before the first fault: any step
    assert t(st(now=10.1, events=[_group_step(0, 1010)]))
    assert t.delay is None  # no wait: nothing to record


def test_in_training_keeps_its_gap_from_the_last_injection() -> None:
    from chaos.triggers.in_training import InTraining, InTrainingParams

    t = InTraining(InTrainingParams(after_s=10, gap_s=3))
    step = [{"ev": "step", "step": 3}]
    state = st(now=11, events=step)
    state.last_inject = 10.5  # another fault struck half a second ago
    assert not t(state)
    state = st(now=13.6, events=step)
    state.last_inject = 10.5
    assert t(state)
