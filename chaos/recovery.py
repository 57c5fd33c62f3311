"""Recovery figures per injected fault: detect_s, restart_s, resume_s, regain_s and lost_steps (DESIGN.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.events import History

if TYPE_CHECKING:
    from chaos.checks.base import FaultRecord

# Workload events that show the job reacted to a fault on its own (as opposed to dying of it).
REACTION_EVENTS = ("health", "ckpt_error", "ckpt_reject")


def _attempt_at(history: History, t0: float) -> str | None:
    starts = [r for r in history.of("start") if r.get("t", 0) <= t0]
    return str(starts[-1].get("attempt")) if starts else None


def compute_recovery(history: History, fault: "FaultRecord") -> dict[str, Any]:
    """Figures for one fault injected at ``fault.t_inject``; a figure is None when it never happened."""
    t0 = fault.t_inject
    before = _attempt_at(history, t0)
    pre_max = history.max_step(until=t0)
    victims = {int(p) for p in fault.details.get("pids", [])}
    later = [r for r in history.records if r.get("t", 0) > t0]

    detect_t = None
    for r in later:
        ev = r.get("ev")
        if (ev == "worker_exit" and r.get("worker_pid") not in victims) \
                or ev in REACTION_EVENTS \
                or (ev in ("worker_spawn", "start") and str(r.get("attempt")) != before):
            detect_t = r["t"]
            break

    restart = next((r for r in later if r.get("ev") == "start" and str(r.get("attempt")) != before), None)
    figures: dict[str, Any] = {
        "attempt_before": before,
        "pre_fault_max_step": pre_max,
        "detect_s": _delta(detect_t, t0),
        "restart_s": None, "resume_s": None, "regain_s": None, "lost_steps": None,
        "attempt_after": None, "resumed_from_step": None,
    }
    if restart is None:
        return figures
    after = str(restart.get("attempt"))
    figures["attempt_after"] = after
    figures["restart_s"] = _delta(restart["t"], t0)
    steps = [r for r in later if r.get("ev") == "step" and str(r.get("attempt")) == after]
    if steps:
        figures["resume_s"] = _delta(steps[0]["t"], t0)
    regain = next((r for r in later if r.get("ev") == "step" and str(r.get("attempt")) != before
                   and int(r.get("step", 0)) >= pre_max), None)
    if regain is not None:
        figures["regain_s"] = _delta(regain["t"], t0)
    loads = [int(r.get("step") or 0) for r in later if r.get("ev") == "ckpt_load" and str(r.get("attempt")) == after]
    if loads:
        figures["resumed_from_step"] = min(loads)
        figures["lost_steps"] = max(0, pre_max - min(loads))
    return figures


def _delta(t: float | None, t0: float) -> float | None:
    return None if t is None else round(max(0.0, t - t0), 3)


