"""``rolled_back``: after a transient in-step fault (a NaN, a flipped bit), nothing computed after it survives.

A NaN or a silent corruption poisons every step computed after it, and every checkpoint saved from
them. A stack that recovers properly goes back to a checkpoint committed before the fault and trains
the steps again. So the final lineage (the chain of checkpoint loads from step 0 to the end,
chaos.evidence.lineage) must hold no step that the process the fault struck computed at or after the
step it struck, before it reloaded a checkpoint (the attempt's segment: a restart starts a new attempt,
an in-process rollback a new segment of the same one), and must reach past that step: the job trained
on, from before the fault. That a reload really restored the state it names is for ``matches_golden``
and ``no_corrupt_commit`` to prove (the digest and the values); this check holds the lineage to it.

Where the fault struck comes from the ranks' own ``instep`` events (chaos.instep.rank writes one per
application, with the step being computed). They are held to the harness's own record of when it
armed the fault: an in-step fault acts within two steps of being armed (it is picked up at the next
step boundary), so a landing reported later than that is a contradiction, never a pass.
"""

from __future__ import annotations

from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.lineage import Lineage, Link, Segment, segment_at
from chaos.evidence.records import Instep, Step
from chaos.registry import FAULTS

PICKUP_STEPS = 2
"""At most how many steps after the highest step reported when it was armed an in-step fault acts."""


def in_step_faults(outcome: RunOutcome) -> list[FaultRecord]:
    """The run's injected faults that act inside the step (``Fault.in_step``)."""
    return [f for f in outcome.injected_faults if getattr(FAULTS.get(f.kind), "in_step", False)]


def landings(outcome: RunOutcome, fault: FaultRecord) -> list[Instep]:
    """The ``instep`` records of ``fault``: each rank's report of acting on it, oldest first."""
    return sorted((r for r in outcome.history.of("instep") if r.fault == fault.index
                   and isinstance(r.step, int) and r.t >= fault.t_inject),  # type: ignore[operator]
                  key=lambda r: r.t)


class RolledBack(Check, kind="rolled_back"):
    """Nothing computed after a transient in-step fault survives: the job went back to a checkpoint committed before it and trained on."""

    Config = CheckConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = in_step_faults(outcome)
        transient = [f for f in faults if f.details.get("steps") is not None]
        if not transient:
            persistent = [f.label for f in faults]
            return self.inconclusive(
                "no transient in-step fault was injected, so there is nothing to roll back"
                + (f" ({', '.join(persistent)} act on every step until reverted: no rollback can outrun them)"
                   if persistent else "; add a nan, loss-spike or bitflip fault with steps: 1"))
        lineage = self.lineage_or_verdict(outcome)
        if isinstance(lineage, CheckResult):
            return lineage
        kept = lineage.kept_steps()
        figures: dict[str, Any] = {}
        for fault in transient:
            problem, figs = self._judge(outcome, fault, kept, lineage)
            figures[fault.label] = figs
            if problem is not None:
                return problem(f"{fault.label}: {figs['why']}", **figures)
        return self.passed("; ".join(f"{label}: {figs['why']}" for label, figs in figures.items()), **figures)

    def _judge(self, outcome: RunOutcome, fault: FaultRecord, kept: list[tuple[Link, Step]],
               lineage: Lineage) -> tuple[Any, dict[str, Any]]:
        acts = landings(outcome, fault)
        if not acts:
            return self.inconclusive, {"why": "no rank reported acting on it (no instep event): the fault may never "
                                              "have reached the step (was the in-step bootstrap on the ranks' path? "
                                              "see the journal's diagnostics)"}
        first = acts[0]
        attempt, step = str(first.attempt), int(first.step)
        armed_at = max((int(r.step) for r in outcome.history.of("step", attempt=attempt)
                        if r.t <= fault.t_inject), default=0)  # type: ignore[operator]
        figs: dict[str, Any] = {"attempt": attempt, "acted_step": step, "armed_at_step": armed_at,
                                "ranks": sorted({r.rank for r in acts}, key=str)}
        if step > armed_at + PICKUP_STEPS:
            figs["why"] = (f"rank {first.rank} reports acting in step {step}, but attempt {attempt} was at step "
                           f"{armed_at} when the harness armed it; an in-step fault acts within {PICKUP_STEPS} steps, "
                           f"so the landing is contradicted, not proven")
            return self.failed, figs
        # A fault written between two steps reports the step whose checkpoint may already hold it (taints_from,
        # the step reported before it acted): a resume from that checkpoint carries it on.
        # The state a fault corrupted lives on in the segment it acted in (its process, until that reloads a
        # checkpoint): a restart starts a new attempt, an in-process rollback a new segment of the same one. A
        # struck rank that did not log the reload its peers logged may never have reloaded: its own word is missing.
        for a in acts:
            own = [s for s in lineage.segments if s.attempt == str(a.attempt)]
            if len(own) > 1 and sum(1 for s in own if a.rank in s.rank_load_t) < len(own):
                figs["why"] = (f"rank {a.rank}, where the fault acted, logged a ckpt_load in only some of "
                               f"attempt {a.attempt}'s {len(own)} segments (its peers reloaded in-process): "
                               f"whether its own state was reloaded is unknown; every rank emits ckpt_load on a reload")
                return self.inconclusive, figs
        struck = {(id(_segment_of(lineage, a)), _taints_from(a)) for a in acts}
        tainted = sorted({int(r.step) for link, r in kept for seg, since in struck
                          if id(link.segment) == seg and int(r.step) >= since})
        if tainted:
            figs["tainted_steps"] = tainted
            figs["why"] = (f"steps {_span(tainted)} of attempt {attempt}, computed at or after the fault acted in step "
                           f"{step}, are in the final lineage: the job trained on (or resumed from) state the fault "
                           f"had corrupted")
            return self.failed, figs
        later = [(link, r) for link, r in kept if int(r.step) >= step]
        if not later:
            figs["why"] = (f"the final lineage ends before step {step}, where the fault acted: the job did not train "
                           f"past it")
            return self.failed, figs
        resumed = sorted({link.segment.name for link, _r in later})
        figs["resumed_in"] = resumed
        figs["why"] = (f"acted in step {step} of attempt {attempt}; no step computed after it survives, and "
                       f"{'attempt(s)' if all('#' not in n for n in resumed) else 'segment(s)'} {', '.join(resumed)} "
                       f"trained steps {step}-{max(int(r.step) for _l, r in later)} again from before it")
        return None, figs


def _segment_of(lineage: Lineage, act: Instep) -> Segment | None:
    """The segment of the struck attempt whose process the fault acted in (None: the attempt has no segment)."""
    own = [s for s in lineage.segments if s.attempt == str(act.attempt)]
    return segment_at(own, act.rank, float(act.t)) if own else None


def _taints_from(act: Instep) -> int:
    """The first step of the struck attempt the fault may be in: its own step, or for one written between two
    steps, the step before (whose checkpoint was saved after it acted); never later than where it acted."""
    step = int(act.step)
    early = act.taints_from
    return min(step, int(early)) if isinstance(early, int) and not isinstance(early, bool) else step


def _span(steps: list[int]) -> str:
    return f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])
