"""A hang or partition is acted on (a worker exit, a health event, a new attempt) within max_s, not after gloo's 30-minute default."""

from __future__ import annotations

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome

GLOO_DEFAULT_TIMEOUT_S = 1800.0
"""What a job without a configured collective timeout waits before a hung peer surfaces (NCCL: 600 s)."""


class DetectionConfig(CheckConfig):
    max_s: float = Field(gt=0, le=24 * 3600)
    """Bound on detect_s per fault: the workload's collective timeout plus slack for the agent to notice."""
    faults: list[str] = Field(default_factory=lambda: ["hang-rank", "partition", "network-degrade", "xid"])
    """Fault kinds whose detection is judged (others, e.g. kill-rank, are detected trivially)."""


class Detection(Check, kind="detection"):
    """A hang or partition is acted on (a worker exit, a health event, a new attempt) within max_s, not after gloo's 30-minute default."""

    Config = DetectionConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        c = self.config
        judged = [f for f in outcome.injected_faults if f.kind in c.faults]
        if not judged:
            return self.inconclusive(f"no fault of kind {', '.join(c.faults)} was injected, so detection was never "
                               f"exercised; trigger the fault earlier or raise timeout_s")
        figures = {f.label: f.recovery.get("detect_s") for f in judged}
        problems = []
        for f in judged:
            if f.recovery.get("unjudgeable"):
                return self.inconclusive(f"{f.label}: {f.recovery['unjudgeable']}", detect_s=figures, max_s=c.max_s)
            detect = f.recovery.get("detect_s")
            if detect is None:
                released = " before it was released" if f.t_release else " before the run ended"
                problems.append(f"{f.label} was never acted on (no worker exit, health event or new attempt "
                                f"caused by it{released}); is the workload's collective timeout set? "
                                f"gloo's default is {GLOO_DEFAULT_TIMEOUT_S:.0f} s")
            elif detect > c.max_s:
                problems.append(f"{f.label} detected after {detect:.1f} s > {c.max_s:g} s")
        if problems:
            return self.failed("; ".join(problems), detect_s=figures, max_s=c.max_s)
        worst = max(v for v in figures.values() if v is not None)
        return self.passed(f"every hang/partition acted on within {worst:.1f} s (bound {c.max_s:g} s, "
                           f"{GLOO_DEFAULT_TIMEOUT_S / max(worst, 0.001):.0f}x sooner than gloo's default "
                           f"{GLOO_DEFAULT_TIMEOUT_S:.0f} s)", detect_s=figures, max_s=c.max_s)
