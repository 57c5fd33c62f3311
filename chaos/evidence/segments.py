"""The pieces of a goodput split: a segment of wall time charged to one cause, and the step it measures by."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

SLOW_FACTOR = 1.5
"""A step slower than this many times the median step pays the excess as 'slow' badput."""


@dataclass
class Segment:
    t0: float
    t1: float
    cause: str
    attempt: str | None = None
    fault: str | None = None
    """The fault this badput is charged to (its label), when one caused it."""

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


def step_spans(segments: list[Segment]) -> list[float]:
    return [s.seconds for s in segments if s.cause in ("productive", "recompute")]


def median_step(segments: list[Segment]) -> float | None:
    spans = step_spans(segments)
    return statistics.median(spans) if len(spans) >= 5 else None
