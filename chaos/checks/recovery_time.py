"""``recovery_time``: after every injected fault, the named recovery figure stayed within its bound."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome

Metric = Literal["detect_s", "restart_s", "resume_s", "regain_s", "lost_steps"]


class RecoveryTimeConfig(CheckConfig):
    metric: Metric = "resume_s"
    """detect_s (first reaction), restart_s (next attempt's first start), resume_s (its first step), regain_s (back at the pre-fault step), lost_steps."""
    max_s: float | None = Field(default=None, gt=0)
    """Upper bound for a *_s metric, in seconds."""
    max: float | None = Field(default=None, ge=0)
    """Upper bound for lost_steps (or any metric, in its unit)."""


class RecoveryTime(Check, kind="recovery_time"):
    """After every injected fault, the named recovery figure stayed within its bound."""

    Config = RecoveryTimeConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        c = self.config
        bound = c.max_s if c.max_s is not None else c.max
        injected = [f for f in outcome.faults if f.error is None]
        if not injected:
            return self.failed("no fault was injected, so there is no recovery to time "
                               "(did the trigger fire? see harness.jsonl)")
        per_fault = {f.label: f.recovery.get(c.metric) for f in injected}
        worst = None
        for label, value in per_fault.items():
            if value is None:
                return self.failed(f"{label}: {c.metric} never happened (no recovery observed after the fault)",
                                   **{c.metric: per_fault})
            worst = value if worst is None else max(worst, value)
        if bound is not None and worst is not None and worst > bound:
            return self.failed(f"{c.metric} {worst:g} exceeds the bound {bound:g}", **{c.metric: per_fault})
        limit = f" (bound {bound:g})" if bound is not None else ""
        return self.passed(f"worst {c.metric} {worst:g}{limit} over {len(injected)} fault(s)", **{c.metric: per_fault})
