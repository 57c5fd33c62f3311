"""A hang or partition is acted on (a worker exit, a health event, a new attempt) within max_s, not after gloo's 30-minute default.

A fault inside the step (chaos.instep: nan, loss-spike, bitflip, oom, collective-error) is detected by a
health event that names its class (the fault's ``named_by``: the guard's ``nonfinite``, the replica
check's ``sdc``, ``oom``) or by the job aborting, within ``max_s`` and, with ``max_steps``, within that many
steps of the step it acted in (chaos.evidence.in_step). And nobody is left waiting: every rank of the
struck attempt exited or trained past that step within ``max_s`` (an OOM or a failed collective on one
rank must not hold its peers in a collective until a timeout).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.in_step import KINDS as IN_STEP
from chaos.evidence.in_step import named_by

GLOO_DEFAULT_TIMEOUT_S = 1800.0
"""What a job without a configured collective timeout waits before a hung peer surfaces (NCCL: 600 s)."""


class DetectionConfig(CheckConfig):
    max_s: float = Field(gt=0, le=24 * 3600)
    """Bound on detect_s per fault: the workload's collective timeout plus slack for the agent to notice."""
    faults: list[str] = Field(default_factory=lambda: ["hang-rank", "partition", "network-degrade", "xid", *IN_STEP])
    """Fault kinds whose detection is judged (others, e.g. kill-rank, are detected trivially)."""
    max_steps: int | None = Field(default=None, ge=0, le=1_000_000)
    """In-step faults: bound on the steps from the one the fault acted in to the one it was caught in (0: caught
    in the very step, before the optimizer applied it). Unset: only max_s is judged."""


class Detection(Check, kind="detection"):
    """A hang or partition is acted on (a worker exit, a health event, a new attempt) within max_s, not after gloo's 30-minute default; an in-step fault is caught within max_s (and max_steps) with no rank left waiting."""

    Config = DetectionConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        c = self.config
        judged = [f for f in outcome.injected_faults if f.kind in c.faults]
        if not judged:
            return self.inconclusive(f"no fault of kind {', '.join(c.faults)} was injected, so detection was never "
                               f"exercised; trigger the fault earlier or raise timeout_s")
        figures = {f.label: f.recovery.get("detect_s") for f in judged}
        extra: dict[str, Any] = {"max_s": c.max_s}
        if c.max_steps is not None:
            extra["max_steps"] = c.max_steps
        in_step = [f for f in judged if f.kind in IN_STEP]
        steps = {f.label: f.recovery.get("detect_steps") for f in in_step}
        if steps:
            extra["detect_steps"] = steps
            extra["settled_s"] = {f.label: f.recovery.get("settled_s") for f in in_step}
        for f in in_step:
            if named_by(f) is None:
                return self.inconclusive(f"{f.label}: the journal does not say which health events name this fault "
                                         f"(no named_by recorded with its injection: a journal from before it was "
                                         f"kept?), so no event can be credited with catching it; rerun it",
                                         detect_s=figures, **extra)
        problems, unknown = [], []
        for f in judged:
            if f.recovery.get("unjudgeable"):
                return self.inconclusive(f"{f.label}: {f.recovery['unjudgeable']}", detect_s=figures, **extra)
            detect = f.recovery.get("detect_s")
            if detect is None:
                released = " before it was released" if f.t_release else " before the run ended"
                if f.kind in IN_STEP:
                    problems.append(f"{f.label} was never caught (no health event naming it as "
                                    f"{'/'.join(named_by(f) or []) or 'its class'} and no abort of the attempt it "
                                    f"struck{released}): the job trained on with it")
                else:
                    problems.append(f"{f.label} was never acted on (no worker exit, health event or new attempt "
                                    f"caused by it{released}); is the workload's collective timeout set? "
                                    f"gloo's default is {GLOO_DEFAULT_TIMEOUT_S:.0f} s")
            elif detect > c.max_s:
                problems.append(f"{f.label} detected after {detect:.1f} s > {c.max_s:g} s")
            if f.kind in IN_STEP:
                problems += self._in_step(f, unknown)
        if problems:
            return self.failed("; ".join(problems), detect_s=figures, **extra)
        if unknown:
            return self.inconclusive("; ".join(unknown), detect_s=figures, **extra)
        worst = max(v for v in figures.values() if v is not None)
        if steps:
            return self.passed(
                f"every fault caught within {worst:.1f} s (bound {c.max_s:g} s)"
                + (f" and {max(v for v in steps.values() if v is not None)} step(s) of where it acted (bound "
                   f"{c.max_steps})" if c.max_steps is not None else "")
                + "; no rank left waiting", detect_s=figures, **extra)
        return self.passed(f"every hang/partition acted on within {worst:.1f} s (bound {c.max_s:g} s, "
                           f"{GLOO_DEFAULT_TIMEOUT_S / max(worst, 0.001):.0f}x sooner than gloo's default "
                           f"{GLOO_DEFAULT_TIMEOUT_S:.0f} s)", detect_s=figures, **extra)

    def _in_step(self, f: FaultRecord, unknown: list[str]) -> list[str]:
        """The in-step bounds: steps from landing to detection, and every rank settled within max_s."""
        c, rec = self.config, f.recovery
        problems = []
        ev = rec.get("evidence", {})
        if c.max_steps is not None and rec.get("detect_s") is not None:
            if rec.get("acted_step") is None:
                unknown.append(f"{f.label}: no rank reported acting on it (no instep event), so the steps to its "
                               f"detection are unknown; was the in-step bootstrap on the ranks' path?")
            elif rec.get("detect_steps") is None:
                unknown.append(f"{f.label}: the step it was caught in is unknown ({ev.get('detect_step', 'no evidence')})")
            elif rec["detect_steps"] > c.max_steps:
                problems.append(f"{f.label} acted in step {rec['acted_step']} and was caught in step "
                                f"{rec['detect_step']}: {rec['detect_steps']} step(s) > {c.max_steps} trained on it")
        if rec.get("waiting_ranks"):
            problems.append(f"{f.label}: {ev.get('settled_s')}: left waiting")
        elif rec.get("settled_s") is None:
            unknown.append(f"{f.label}: whether any rank was left waiting is unknown ({ev.get('settled_s', 'no evidence')})")
        elif rec["settled_s"] > c.max_s:
            problems.append(f"{f.label}: a rank was left waiting: the last rank of the struck attempt exited or trained "
                            f"on {rec['settled_s']:.1f} s after the fault > {c.max_s:g} s")
        return problems
