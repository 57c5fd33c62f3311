"""Two settings of one thing measured side by side, for the benchmarks in ci/bench.

Each trial measures both settings, and which goes first alternates from trial to trial, so a drift
of the host (another job, a slower hour) lands on both alike. A table row per subject: for each
figure, the median of each setting with its spread (min-max) and the ratio of the medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence


def alternate(trials: int, measure: Callable[[bool], Sequence[float]]) -> dict[bool, list[Sequence[float]]]:
    """``measure(setting)`` for both settings in each of ``trials`` trials, True first in even trials."""
    runs: dict[bool, list[Sequence[float]]] = {True: [], False: []}
    for i in range(trials):
        for setting in ((True, False) if i % 2 == 0 else (False, True)):
            runs[setting].append(measure(setting))
    return runs


def spread(values: Sequence[float], digits: int = 2) -> str:
    """The median and the range: ``2.00 (1.00-3.00)``."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def columns(runs: dict[bool, list[Sequence[float]]], digits: int = 2) -> list[str]:
    """Per figure, in the order ``measure`` returns them: True's spread, False's spread, the ratio True / False."""
    out: list[str] = []
    for k in range(len(runs[True][0])):
        on, off = [r[k] for r in runs[True]], [r[k] for r in runs[False]]
        base = statistics.median(off)
        ratio = f"{statistics.median(on) / base:.2f}" if base else "-"  # a figure the baseline does not have
        out += [spread(on, digits), spread(off, digits), ratio]
    return out
