"""Straggler ("lemon node") detection: name the rank whose own time per step is slower than its peers'.

One degraded GPU or link slows a synchronous job by up to 40 % and logs nothing: every rank waits for
the slowest in each collective, so every rank's *step* time grows alike. What differs is each rank's
*own* time, the part of a step spent outside collectives (data, forward, optimizer, host work): the
straggler's grows, its peers' does not (they spend the difference waiting). Each rank puts its own
time in its slot of a vector that rides in a collective the loop already makes; every rank then
holds the same vector and runs the same detector, so all ranks reach the same decision at the same
step with no extra communication.

Stdlib only: the training loop hands in plain floats.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["alert", "eject"]


@dataclass(frozen=True)
class Straggler:
    """A rank named slow: at which step, how much slower than its peers, over which window."""

    rank: int
    step: int
    ratio: float
    own_s: float
    peers_s: float


@dataclass
class StragglerDetector:
    """Per window of ``window`` steps: the rank whose median own time exceeds ``factor`` times the median of
    the other ranks' medians is suspect; suspect for ``patience`` windows in a row, it is named (once per
    episode: it is named again only after a window in which it was not slow)."""

    world_size: int
    factor: float = 1.5
    window: int = 10
    patience: int = 2
    floor_s: float = 0.0
    """The peers' median is taken as at least this: with times near zero (a fast link answers in well under a
    millisecond) scheduler noise alone can make one rank "1.5x" another, and a ratio of noise names no one."""
    _rows: list[list[float]] = field(default_factory=list)
    _suspect: int | None = None
    _streak: int = 0
    _named: int | None = None

    def observe(self, step: int, own_times: list[float]) -> Straggler | None:
        """Feed one step's own times (one per rank, the same list on every rank); returns a newly named straggler."""
        if self.world_size < 2 or len(own_times) != self.world_size:
            return None
        self._rows.append(list(own_times))
        if len(self._rows) < self.window:
            return None
        medians = [statistics.median(row[r] for row in self._rows) for r in range(self.world_size)]
        self._rows.clear()
        slow = max(range(self.world_size), key=lambda r: medians[r])
        peers = max(statistics.median(m for r, m in enumerate(medians) if r != slow), self.floor_s)
        ratio = medians[slow] / peers if peers > 0 else float("inf")
        if ratio < self.factor:
            self._suspect, self._streak, self._named = None, 0, None
            return None
        self._streak = self._streak + 1 if slow == self._suspect else 1
        self._suspect = slow
        if self._streak < self.patience or self._named == slow:
            return None
        self._named = slow
        return Straggler(slow, step, round(ratio, 3), round(medians[slow], 4), round(peers, 4))
