"""``saved_on_preempt``: after each preemption the job committed a checkpoint of the step it stopped at, and the next attempt resumed from it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome

PREEMPTING = ("preempt",)
"""Fault kinds that give the job a SIGTERM and a grace period before they kill it."""
SIGTERM_REASONS = ("preempt", "sigterm", "signal")
"""``ckpt_begin(..., reason=)`` values that say a save was made because of the SIGTERM (the reference
workloads say "preempt"): only such a save proves the job saves on preemption; a periodic one that
happened to fall between the preemption and the kill proves nothing."""


class SavedOnPreemptConfig(CheckConfig):
    max_lost_steps: int = Field(default=0, ge=0)
    """Steps the preempted attempt ran that the next one had to run again (0: the save on SIGTERM kept everything)."""


class SavedOnPreempt(Check, kind="saved_on_preempt"):
    """After each preemption the job committed a checkpoint of the step it stopped at, and the next attempt resumed from it.

    A scheduler's SIGTERM is a warning with a deadline: a job that saves within the grace period
    loses nothing, one that ignores it loses every step since its last periodic checkpoint. The
    steps lost are those the preempted attempt ran beyond the step the next attempt resumed from.
    """

    Config = SavedOnPreemptConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = [f for f in outcome.injected_faults if f.kind in PREEMPTING]
        if not faults:
            return self.inconclusive("no preempt fault was injected, so no save on preemption can be judged "
                                     "(did the trigger fire? see harness.jsonl)")
        if not outcome.history.of("ckpt_commit"):
            return self.inconclusive("the workload reported no checkpoint at all (no ckpt_commit events), so a save "
                                     "on SIGTERM cannot be told from none; report saves with chaos.sdk")
        figures: dict[str, Any] = {}
        for fault in faults:
            verdict, figs = self._judge(fault, outcome)
            figures[fault.label] = figs
            if verdict is not None:
                return verdict(f"{fault.label}: {figs['why']}", **figures)
        summary = "; ".join(
            f"{k}: saved step {v['saved_step']} {v['save_s']} s after the SIGTERM, {v['lost_steps']} step(s) lost"
            if v["saved_step"] is not None else f"{k}: no save after the SIGTERM, {v['lost_steps']} step(s) lost "
            f"(bound {self.config.max_lost_steps})" for k, v in figures.items())
        return self.passed(summary, **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[Any, dict[str, Any]]:
        h, rec = outcome.history, fault.recovery
        t0 = fault.t_inject or 0.0
        before, after, resumed = rec.get("attempt_before"), rec.get("attempt_after"), rec.get("resumed_from_step")
        figs: dict[str, Any] = {"attempt": before, "last_step": None, "saved_step": None, "save_s": None,
                                "resumed_from_step": resumed, "lost_steps": None, "why": ""}
        if before is None:
            figs["why"] = "the preemption came before any rank had started, so there was nothing to save"
            return self.inconclusive, figs
        if h.of("final", attempt=before):
            figs["why"] = (f"attempt {before} finished its training before the preemption took it; "
                           f"preempt earlier (at_step)")
            return self.inconclusive, figs
        last = h.max_step(attempt=before)
        figs["last_step"] = last
        saves = [r for r in h.of("ckpt_commit", attempt=before) if r.t > t0]
        reasons = {int(r.step or -1): r.reason for r in h.of("ckpt_begin", attempt=before)}
        on_term = [r for r in saves if reasons.get(int(r.step or -1)) in SIGTERM_REASONS]
        if saves:
            best = max(on_term or saves, key=lambda r: int(r.step or 0))
            figs["saved_step"] = int(best.step or 0)
            figs["save_s"] = round(best.t - t0, 3)
            figs["saved_for_sigterm"] = bool(on_term)
        if after is None or resumed is None:
            figs["why"] = (f"the job never ran again after the preemption (no attempt after {before} with a step or "
                           f"ckpt_load), so whether its save was used is unknown")
            return self.inconclusive, figs
        lost = max(0, last - int(resumed))
        figs["lost_steps"] = lost
        if lost > self.config.max_lost_steps:
            # The fault's time, not the signal's: Slurm preempts on its next scheduling pass.
            saved = (f"its newest commit after the preemption began was step {figs['saved_step']}" if saves
                     else "it committed no checkpoint between the preemption and the kill")
            figs["why"] = (f"{lost} step(s) lost: attempt {before} reached step {last}, {saved}, and attempt {after} "
                           f"resumed from step {resumed}, so steps {int(resumed) + 1}..{last} ran twice"
                           f" (bound {self.config.max_lost_steps})")
            return self.failed, figs
        if not on_term and self.config.max_lost_steps == 0:
            # Nothing (or little enough) lost, but no save said it was for the SIGTERM: the
            # preemption fell right after a periodic checkpoint, and a job that ignores SIGTERM looks
            # the same as one that saves on it.
            held = (f"checkpoint step {figs['saved_step']} (committed {figs['save_s']} s after the preemption "
                    f"began, not marked as a save on SIGTERM)" if saves else "a periodic checkpoint")
            figs["why"] = (f"attempt {before} stopped at step {last}, which {held} already held: no save on SIGTERM "
                           f"was needed, so whether the job saves on one was not tested; preempt between periodic "
                           f"saves, and mark a save on SIGTERM with sdk.ckpt_begin(step, path, reason='preempt')")
            return self.inconclusive, figs
        return None, figs
