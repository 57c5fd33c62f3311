"""Goodput at scale, from what the game day measured: the cost of each interruption and of each save.

The model (first order, Young 1974; Daly 2006 for the refinement), stated in every report:

- interruptions arrive as a Poisson process with mean time between them M = 1 / (rate per GPU-hour x GPUs);
- each costs a fixed R (detection + restart + checkpoint load, the medians this run measured per
  category, weighted by the mix) plus, on average, half a checkpoint interval of lost work;
- each save stalls training for delta seconds (this run's median ckpt_begin -> ckpt_commit; an asynchronous
  save stalls it only while staged);
- with a checkpoint every tau seconds of training, the wasted share is delta / tau + (R + tau / 2) / M,
  and goodput is one minus it. Young's optimum is tau* = sqrt(2 delta M); Daly's is
  sqrt(2 delta M) - delta (it counts the save itself as exposed to failure).

Assumptions, also stated: failures are independent and memoryless; one interruption at a time
(R + tau << M); R and delta are the costs measured on this machine at this model size unless the
plan overrides them; nothing is lost to slow steps (stragglers are measured, not projected).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from chaos.evidence.events import History
from chaos.spec.mixes import Mix
from chaos.evidence.goodput import Goodput, blocking_windows

RESTART_PARTS = ("detection", "restart", "ckpt_load")
MODEL = ("wasted share = delta/tau + (R + tau/2)/M; goodput = 1 - wasted share; Young: tau* = sqrt(2 delta M); "
         "Daly: tau* = sqrt(2 delta M) - delta")
ASSUMPTIONS = ("independent, memoryless interruptions at the mix's per-GPU rate; one at a time (R + tau << M); "
               "R and delta as measured in this run (this machine, this model size); slow steps not projected")


@dataclass
class Row:
    gpus: int
    mtbf_h: float
    goodput_used: float
    tau_young_s: float
    tau_daly_s: float
    goodput_young: float

    @property
    def gain(self) -> float:
        return self.goodput_young - self.goodput_used


@dataclass
class Projection:
    restart_s: float
    """R: the mix-weighted median of detection + restart + checkpoint load per interrupting fault."""
    save_s: float
    """delta: the median save stall."""
    interval_s: float
    """tau as used: the median seconds between two commits of one attempt."""
    rows: list[Row] = field(default_factory=list)
    measured_by: dict[str, str] = field(default_factory=dict)
    played: dict[str, float] | None = None
    """The model checked on the game day itself: its own interruptions' rate and mean cost, the goodput
    it predicts, and the goodput measured (productive over wall time less start-up and shut-down)."""

    def as_dict(self) -> dict[str, Any]:
        return {"restart_s": round(self.restart_s, 3), "save_s": round(self.save_s, 4),
                "interval_s": round(self.interval_s, 3), "model": MODEL, "assumptions": ASSUMPTIONS,
                "measured_by": self.measured_by, "played": self.played,
                "rows": [{"gpus": r.gpus, "mtbf_h": round(r.mtbf_h, 4), "goodput_used": round(r.goodput_used, 4),
                          "tau_young_s": round(r.tau_young_s, 2), "tau_daly_s": round(r.tau_daly_s, 2),
                          "goodput_young": round(r.goodput_young, 4), "gain": round(r.gain, 4)} for r in self.rows]}


def goodput_at(tau: float, delta: float, restart: float, mtbf_s: float) -> float:
    if tau <= 0 or mtbf_s <= 0:
        return 0.0
    return max(0.0, 1.0 - delta / tau - (restart + tau / 2.0) / mtbf_s)


def project(split: Goodput, history: History, categories: dict[str, str], mix: Mix, sizes: list[int], *,
            save_s: float | None = None, restart_s: float | None = None) -> Projection | None:
    """The projection table for ``sizes`` GPUs; None when the run measured no interruption or no save.

    ``categories``: fault label -> category, for the faults that fired. ``save_s``, ``restart_s``:
    the user's real costs, projected in place of the ones measured here (the check on the run
    itself always uses what was measured).
    """
    per_category: dict[str, list[float]] = {}
    for label, bill in split.by_fault.items():
        category = categories.get(label)
        if category is None:
            continue
        per_category.setdefault(category, []).append(sum(bill.get(k, 0.0) for k in RESTART_PARTS))
    windows = blocking_windows(history, committed_only=True)  # what a save costs training: its staging, when async
    saves = [e - b for b, e in windows.values()]
    interval = _interval(windows)
    if not per_category or not saves or interval is None:
        return None
    weights = mix.by_category()
    # Categories this run saw interrupt: weight each one's median cost by its share of the mix.
    seen = {c: statistics.median(v) for c, v in per_category.items()}
    restart = sum(seen[c] * weights.get(c, 0) for c in seen) / max(1, sum(weights.get(c, 0) for c in seen))
    measured_delta, measured_restart = statistics.median(saves), restart
    delta = save_s if save_s is not None else measured_delta
    restart = restart_s if restart_s is not None else measured_restart
    rate_per_gpu_h = mix.total / (mix.gpus * mix.span_days * 24.0)
    rows = []
    for gpus in sizes:
        mtbf_s = 3600.0 / (rate_per_gpu_h * gpus)
        young = math.sqrt(2.0 * delta * mtbf_s)
        daly = young - delta if delta < 2 * mtbf_s else mtbf_s
        rows.append(Row(gpus, mtbf_s / 3600.0, goodput_at(interval, delta, restart, mtbf_s), young, daly,
                        goodput_at(young, delta, restart, mtbf_s)))
    measured_by = {
        "restart_s": f"median of {', '.join(RESTART_PARTS)} per interrupting fault, per category "
                     f"({', '.join(f'{c} {v:.2f} s' for c, v in sorted(seen.items()))}), weighted by the mix",
        "save_s": f"median time a save held training, of {len(saves)} saves (ckpt_begin -> ckpt_commit; an "
                  f"asynchronous save's staging, ckpt_staged)",
        "interval_s": "median seconds between consecutive commits of one attempt",
    }
    if restart_s is not None:
        measured_by["restart_s"] = f"given in the plan (project_restart_s); measured here: {measured_restart:.2f} s"
    if save_s is not None:
        measured_by["save_s"] = f"given in the plan (project_save_s); measured here: {measured_delta:.4f} s"
    out = Projection(restart, delta, interval, rows, measured_by)
    # The model checked on the run itself: its own time between interruptions and their mean cost
    # (not the mix's weights), against the goodput it measured outside start-up and shut-down.
    costs = [c for v in per_category.values() for c in v]
    training = split.wall_s - split.seconds.get("startup", 0.0) - split.seconds.get("shutdown", 0.0)
    if costs and training > 0:
        mtbf_s = training / len(costs)
        out.played = {"interruptions": len(costs), "mtbf_s": round(mtbf_s, 2),
                      "restart_s": round(statistics.mean(costs), 3),
                      "predicted": round(goodput_at(interval, measured_delta, statistics.mean(costs), mtbf_s), 4),
                      "measured": round(split.seconds.get("productive", 0.0) / training, 4)}
    return out


def _interval(windows: dict[tuple[str, Any], tuple[float, float]]) -> float | None:
    """Median seconds between consecutive commits of one attempt (a restart's gap is not an interval)."""
    by_attempt: dict[str, list[float]] = {}
    for (attempt, _step), (_b, e) in windows.items():
        by_attempt.setdefault(attempt, []).append(e)
    gaps = [b - a for times in by_attempt.values() for a, b in zip(sorted(times), sorted(times)[1:])]
    return statistics.median(gaps) if gaps else None
