"""``fault_mix``: a game day's drawn faults struck the job: how many fired per category, none failed, and what each cost."""

from __future__ import annotations

import statistics
from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome


class FaultMixConfig(CheckConfig):
    """No fields: the schedule comes from the experiment's ``gameday`` section."""


class FaultMix(Check, kind="fault_mix"):
    """A game day's drawn faults struck the job: how many fired per category, none failed, and what each cost."""

    Config = FaultMixConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        schedule = outcome.experiment.schedule
        if outcome.experiment.gameday is None:
            return self.inconclusive("this experiment has no gameday section, so there is no fault mix to judge")
        if not schedule:
            return self.inconclusive("the game day drew no fault (raise gpus or span_days): nothing was tested")
        by_label = {f.label: f for f in outcome.faults}
        per: dict[str, dict[str, Any]] = {}
        failed, missing = [], []
        for s in schedule:
            row = per.setdefault(s.category, {"scheduled": 0, "injected": 0, "not_reached": 0, "failed": 0,
                                              "regain_s": []})
            row["scheduled"] += 1
            rec = by_label.get(s.label)
            if rec is None:
                missing.append(s.label)
            elif rec.injected:
                row["injected"] += 1
                if rec.recovery.get("regain_s") is not None:
                    row["regain_s"].append(rec.recovery["regain_s"])
            elif rec.status == "failed" or rec.error:
                row["failed"] += 1
                failed.append(f"{s.label} ({s.cause}): {rec.error}")
            else:
                row["not_reached"] += 1
        for row in per.values():
            times = row.pop("regain_s")
            row["mttr_s"] = round(statistics.median(times), 3) if times else None
        fired = sum(r["injected"] for r in per.values())
        table = "; ".join(f"{c} {r['injected']}/{r['scheduled']}" for c, r in sorted(per.items()))
        figures = {"categories": per, "scheduled": len(schedule), "injected": fired}
        if missing:
            return self.failed(f"{len(missing)} drawn fault(s) have no record in the run: {', '.join(missing[:5])}",
                               **figures)
        if failed:
            return self.failed(f"{len(failed)} drawn fault(s) failed to inject: {'; '.join(failed[:3])}", **figures)
        if not fired:
            return self.inconclusive(f"none of the {len(schedule)} drawn faults fired before the run ended, so the "
                                     f"game day tested nothing; lengthen the workload or shorten window_s", **figures)
        late = len(schedule) - fired
        finished = outcome.exit_code == 0 and bool(outcome.history.finals())
        if late and not finished:
            # Their moment never came because the job broke or was stopped first: the mix was not played.
            return self.inconclusive(f"only {fired} of {len(schedule)} drawn faults struck ({table}): the run ended "
                                     f"without finishing before the other {late} came due, so the mix was not "
                                     f"played out", **figures)
        tail = f"; {late} came due after the workload had finished" if late else ""
        return self.passed(f"{fired} of {len(schedule)} drawn faults struck the job ({table}){tail}", **figures)
