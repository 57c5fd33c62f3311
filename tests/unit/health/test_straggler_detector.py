"""The straggler detector names the rank whose own time is slow, once per episode, and never a merely noisy one."""

from __future__ import annotations

import random

from chaos.health.straggler import StragglerDetector


def feed(det: StragglerDetector, rows: list[list[float]], first_step: int = 1):
    out = []
    for i, row in enumerate(rows):
        named = det.observe(first_step + i, row)
        if named is not None:
            out.append(named)
    return out


def test_a_rank_twice_as_slow_for_two_windows_is_named_once() -> None:
    det = StragglerDetector(world_size=4, factor=1.5, window=5, patience=2)
    normal = [[0.05, 0.05, 0.05, 0.05]] * 10
    slow = [[0.05, 0.05, 0.11, 0.05]] * 30
    named = feed(det, normal + slow)
    assert len(named) == 1
    [s] = named
    # Windows end at steps 15 and 20 (slow); named at the second slow window: step 20.
    assert (s.rank, s.step, s.ratio) == (2, 20, 2.2)


def test_a_rank_named_again_only_after_it_recovered() -> None:
    det = StragglerDetector(world_size=2, factor=1.5, window=4, patience=1)
    slow, normal = [[0.2, 0.05]] * 8, [[0.05, 0.05]] * 4
    assert [s.rank for s in feed(det, slow + normal + slow)] == [0, 0]


def test_jitter_and_a_single_slow_step_are_not_a_straggler() -> None:
    rng = random.Random(0)
    det = StragglerDetector(world_size=2, factor=1.5, window=10, patience=2)
    rows = [[0.05 * rng.uniform(0.7, 1.3), 0.05 * rng.uniform(0.7, 1.3)] for _ in range(500)]
    rows[100] = [2.0, 0.05]  # a checkpoint flush, a GC pause: one step, not a lemon
    assert feed(det, rows) == []


def test_one_rank_or_a_malformed_row_judges_nothing() -> None:
    assert feed(StragglerDetector(world_size=1, window=1, patience=1), [[9.0]] * 5) == []
    assert feed(StragglerDetector(world_size=2, window=1, patience=1), [[9.0]] * 5) == []
