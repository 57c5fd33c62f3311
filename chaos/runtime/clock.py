"""The harness's one clock: every timestamp a run writes and every wait it makes comes from here.

A run keeps two kinds of time. Wall time (seconds since the epoch) stamps what must line up with
the workload's own events, which carry ``time.time()`` from other processes: fault injection and
revert, harness.jsonl, the ledger. Monotonic time measures the run's own intervals: when a
trigger is due, a join timeout, ``timeout_s``. The runner takes one ``Clock`` and hands it to the
run's context, log and ledger, so a test can run the loop on a clock it drives (a timeout in
seconds of real time, every stamp recognisable) instead of on the host's.
"""

from __future__ import annotations

import time


class Clock:
    """The host's time. Subclasses override all three together, so the readings stay consistent."""

    def wall(self) -> float:
        """Seconds since the epoch: the time base of the event protocol's ``t``."""
        return time.time()

    def mono(self) -> float:
        """Seconds on a clock that never steps back: for intervals only."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM = Clock()


class ScaledClock(Clock):
    """Real time sped up by ``factor`` and shifted by ``shift_s``: for tests of timing rules that must
    still drive real processes (a fake torchrun), where a fully frozen clock would never let them run.

    Both readings advance ``factor`` times faster than the host's from the moment the clock is made,
    and a sleep of ``s`` seconds waits ``s / factor`` real ones.
    """

    def __init__(self, factor: float = 1.0, shift_s: float = 0.0) -> None:
        if factor <= 0:
            raise ValueError(f"a clock's factor must be positive, got {factor}")
        self.factor = factor
        self.shift_s = shift_s
        self._wall0 = time.time()
        self._mono0 = time.monotonic()

    def _elapsed(self) -> float:
        return (time.monotonic() - self._mono0) * self.factor

    def wall(self) -> float:
        return self._wall0 + self.shift_s + self._elapsed()

    def mono(self) -> float:
        return self._mono0 + self._elapsed()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / self.factor)
