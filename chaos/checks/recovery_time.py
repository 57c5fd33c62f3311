"""``recovery_time``: after every injected fault, the named recovery figure stayed within its bound."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome

Metric = Literal["detect_s", "restart_s", "resume_s", "regain_s", "lost_steps", "requeue_s"]


class RecoveryTimeConfig(CheckConfig):
    metric: Metric = "resume_s"
    """detect_s (first reaction), restart_s (next attempt's first start), resume_s (its first step), regain_s (back at the pre-fault step), lost_steps, requeue_s (slurm target: until Slurm ran the requeued job again)."""
    max_s: float | None = Field(default=None, gt=0)
    """Upper bound for a *_s metric, in seconds."""
    max: float | None = Field(default=None, ge=0)
    """Upper bound for lost_steps (or any metric, in its unit). One of max_s and max is required."""

    @model_validator(mode="after")
    def _bounded(self) -> "RecoveryTimeConfig":
        # A figure with no bound proves nothing: 'recovery_time: {}' once passed a 3004 s resume.
        if self.max_s is None and self.max is None:
            unit = "max (steps)" if self.metric == "lost_steps" else "max_s (seconds)"
            raise ValueError(f"recovery_time of {self.metric} needs a bound: set {unit}, e.g. "
                             f"{{metric: {self.metric}, {'max: 0' if self.metric == 'lost_steps' else 'max_s: 60'}}}"
                             f"; without one nothing is judged (the figures are in journal.json either way)")
        return self


class RecoveryTime(Check, kind="recovery_time"):
    """After every injected fault, the named recovery figure stayed within its bound."""

    Config = RecoveryTimeConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        c = self.config
        bound = c.max_s if c.max_s is not None else c.max
        injected = outcome.injected_faults
        if not injected:
            return self.inconclusive("no fault was injected, so there is no recovery to time "
                                     "(did the trigger fire? see harness.jsonl)")
        per_fault = {f.label: f.recovery.get(c.metric) for f in injected}
        evidence = {f.label: f.recovery.get("evidence", {}).get(c.metric) for f in injected}
        worst = None
        for f in injected:
            value = per_fault[f.label]
            if f.recovery.get("unjudgeable"):
                return self.inconclusive(f"{f.label}: {f.recovery['unjudgeable']}", **{c.metric: per_fault})
            if value is None and c.metric == "lost_steps" and f.recovery.get("resumed_from_step") is not None:
                # It resumed; what is unknown is which checkpoint was durable when the fault acted.
                return self.inconclusive(f"{f.label}: lost_steps unknown: "
                                         f"{f.recovery.get('evidence', {}).get('lost_steps', 'no evidence')}",
                                         **{c.metric: per_fault})
            if value is None:
                # What the history showed instead, where the recovery figures recorded it (a restart that
                # was spawned but never joined), else what was looked for and not found.
                why = evidence[f.label] if isinstance(evidence[f.label], str) else _missing(c.metric)
                return self.failed(f"{f.label}: {c.metric} never happened ({why})", **{c.metric: per_fault})
            worst = value if worst is None else max(worst, value)
        if bound is not None and worst is not None and worst > bound:
            return self.failed(f"{c.metric} {worst:g} exceeds the bound {bound:g}", **{c.metric: per_fault})
        limit = f" (bound {bound:g})" if bound is not None else ""
        outside = [e for e in evidence.values() if e and "seen from outside" in e]
        how = f"; seen from outside: {outside[0]}" if outside else ""
        return self.passed(f"worst {c.metric} {worst:g}{limit} over {len(injected)} fault(s){how}",
                           evidence=evidence, **{c.metric: per_fault})


def _missing(metric: str) -> str:
    return {
        "detect_s": "no worker exit, health event or new attempt caused by the fault before it was released",
        "restart_s": "no later attempt started (no start event, no worker spawn)",
        "resume_s": "the next attempt recorded no step (no step event, nothing matched step_regex)",
        "regain_s": "the job never got back to the step it had reached before the fault",
        "lost_steps": "no later attempt resumed: the step it resumed from is unknown (no ckpt_load and no step)",
        "requeue_s": "Slurm never ran the job again after a requeue (not a slurm target, or the job recovered "
                     "inside its allocation)",
    }[metric]
