"""The run's one clock: the host's, or a scaled and shifted one that tests drive real processes on."""

from __future__ import annotations

import time

import pytest

from chaos.runtime.clock import SYSTEM, ScaledClock


def test_the_system_clock_is_the_hosts() -> None:
    assert abs(SYSTEM.wall() - time.time()) < 1 and abs(SYSTEM.mono() - time.monotonic()) < 1


def test_a_scaled_clock_runs_fast_from_a_shifted_start_and_sleeps_short() -> None:
    clock = ScaledClock(factor=50, shift_s=1000.0)
    assert clock.wall() - time.time() >= 1000.0
    wall0, mono0, real0 = clock.wall(), clock.mono(), time.monotonic()
    clock.sleep(5.0)  # 0.1 s of real time
    real = time.monotonic() - real0
    assert real < 2.0
    # Both readings moved by the same scaled amount: an interval reads the same on either.
    assert clock.mono() - mono0 >= 5.0 and abs((clock.wall() - wall0) - (clock.mono() - mono0)) < 0.5


def test_a_clock_that_stands_still_or_runs_backwards_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        ScaledClock(factor=0)
