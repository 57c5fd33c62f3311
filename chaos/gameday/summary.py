"""The figures a report shows beside the verdicts: the goodput split of any run; for a game day also its
plan, its drawn schedule and the projection to scale. Computed from the run's records, so ``chaos
report`` can (re)build them for any finished run."""

from __future__ import annotations

from typing import Any

from chaos.evidence.events import History
from chaos.gameday.projection import project
from chaos.evidence.goodput import Goodput, compute_goodput
from chaos.evidence.outcome import FaultRecord


def summarize(history: History, faults: list[FaultRecord], experiment: Any | None,
              split: Goodput | None = None) -> dict[str, Any]:
    """``split``: the run's goodput split when the caller has it (a finished run's outcome computed it once for
    the check and the journal); computed here otherwise (``chaos report`` on a run directory)."""
    if split is None:
        split = compute_goodput(history, faults)
    launches = history.of("launch")
    t0 = launches[0]["t"] if launches else 0.0
    out: dict[str, Any] = {"goodput": {**split.as_dict(), "segments": [
        [round(s.t0 - t0, 3), round(s.t1 - t0, 3), s.cause, s.fault] for s in split.merged()]}}
    plan = getattr(experiment, "gameday", None)
    if plan is None or split.problems:
        return out
    schedule = experiment.schedule
    fired = {f.label for f in faults if f.injected}
    out["gameday"] = {**plan.model_dump(), "compression": plan.compression, "expected_faults": plan.expected_faults(),
                      "source": plan.the_mix.source,
                      "schedule": [{"at_s": round(s.at_s, 2), "day": round(s.real_h / 24, 3), "cause": s.cause,
                                    "category": s.category, "label": s.label, "why": s.why, "fired": s.label in fired}
                                   for s in schedule]}
    projection = project(split, history, {s.label: s.category for s in schedule if s.label in fired},
                         plan.the_mix, plan.projection_sizes(), save_s=plan.project_save_s,
                         restart_s=plan.project_restart_s)
    out["projection"] = projection.as_dict() if projection is not None else None
    return out
