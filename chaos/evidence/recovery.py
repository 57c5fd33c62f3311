"""Recovery figures per injected fault: detect_s, restart_s, resume_s, regain_s and lost_steps (docs/verdicts.md).

lost_steps is what the stack lost beyond the newest checkpoint that was durable when the fault
acted (0 for a stack that resumes from it, wherever the fault landed); steps_since_ckpt, how far
past that checkpoint the fault landed, and landed_step, the ranks' step at that moment beside the
step an ``at_step`` trigger asked for, describe the fault's timing and are reported, not gated.

Each figure is computed from what the history shows, and says where it came from: a workload that
speaks the event protocol is seen from inside (``start``, ``step``, ``ckpt_load``); one that does
not is seen from outside (worker spawns and exits the harness watched, steps matched by
``step_regex`` on its output). A figure that did not happen is None, never a guess.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from chaos.evidence import in_step
from chaos.evidence.events import History, Record
from chaos.evidence.harness_records import Exit, SlurmJob, WorkerExit, WorkerSpawn
from chaos.evidence.outcome import FaultRecord
from chaos.evidence.records import Health

# Workload events that show the job reacted to a fault on its own (as opposed to dying of it).
REACTION_EVENTS = ("health", "ckpt_error", "ckpt_reject")
FIGURES = ("detect_s", "restart_s", "resume_s", "regain_s", "lost_steps")
LANDING = ("landed_step", "trigger_step", "durable_step", "steps_since_ckpt")
"""Where the fault landed, reported beside the figures and never gated: the ranks' highest step when it
acted, the step its ``at_step`` trigger asked for, the newest durable checkpoint then, and the steps between."""
SLURM_FIGURES = ("requeue_s", "requeue_share")
"""Only on the slurm target: fault -> the job RUNNING again after Slurm requeued it, and that time's share of resume_s."""


def _attempt_at(history: History, t0: float) -> tuple[str | None, str]:
    """The attempt running at ``t0`` and how the harness knows: a rank's ``start``, or a worker it saw spawn."""
    starts = [r for r in history.of("start") if r.t <= t0]
    if starts:
        return str(starts[-1].attempt), "start"
    spawns = [r for r in history.harness(WorkerSpawn) if r.t <= t0]
    if spawns:
        return str(spawns[-1].attempt), "worker_spawn"
    return None, ""


def _normal_end(history: History, attempt: str) -> float | None:
    """When ``attempt`` began ending normally: its first ``final``, or (no protocol) the job's clean exit."""
    finals = [r.t for r in history.of("final", attempt=attempt)]
    if finals:
        return min(finals)
    exits = history.harness(Exit)
    if exits and exits[-1].code == 0 and attempt == (history.all_attempts() or [None])[-1]:
        ends = [r.t for r in history.harness(WorkerExit, attempt=attempt)]
        return min(ends) if ends else exits[-1].t
    return None


def _reaction(history: History, fault: FaultRecord, before: str, until: float | None,
              others: Sequence[FaultRecord] = ()) -> Record | None:
    """The first sign that the job noticed the fault, caused by it and before it was released.

    A worker exit that is the attempt's normal end (after its ``final``, or the clean exit of the
    last attempt) is not a reaction: a job that simply carries on once a hang ends, and finishes,
    was never detected. Nor is the exit of the process the fault itself killed. Nor, once another
    fault has acted (``others``), an exit, spawn or start: a later kill's victim dying and the
    restart it causes are that fault's doing, not the job noticing this one.
    """
    t0 = fault.t_inject or 0.0
    victims = {int(p) for p in fault.details.get("pids", [])}
    for other in others:
        victims |= {int(p) for p in other.details.get("pids", [])}
    next_other = min((o.t_inject for o in others if o.t_inject is not None and o.t_inject > t0), default=None)
    normal_end = _normal_end(history, before)
    in_step_fault = in_step.applies(fault)
    for r in history.records:
        t = r.t
        if t <= t0:
            continue
        if until is not None and t > until:
            return None
        ev = r.ev
        if ev in REACTION_EVENTS:
            if in_step_fault and next_other is not None and t >= next_other:
                continue  # once another fault acted, a health event naming the class may be naming that one
            if _answers(r, fault):
                return r
            continue
        if next_other is not None and t >= next_other:
            continue
        if (ev == "start" or isinstance(r, WorkerSpawn) and r.harness) and str(r.attempt) != before:
            return r
        if isinstance(r, WorkerExit) and r.harness and r.worker_pid not in victims \
                and (normal_end is None or t < normal_end):
            return r
    return None


SILENT_KINDS = ("hang-rank", "partition")
"""Faults no workload event names: only a worker exit or a new attempt shows the job noticed them."""


def _answers(r: Record, fault: FaultRecord) -> bool:
    """Does this health / ckpt_error / ckpt_reject event answer ``fault``, not some other trouble? An XID's
    health event names its code and device; a slow link's is a link event, a straggler's names the slowed
    rank; a hang or partition is named by no event (an unrelated straggler alert is not its detection).
    Other kinds (checkpoint and storage faults) are answered by any of them, as before."""
    ev, d = r.ev, fault.details
    if fault.kind in SILENT_KINDS:
        return False
    named = in_step.answers(r, fault)
    if named is not None:
        return named  # a fault inside the step: a health event naming its class (nan, sdc, oom)
    if fault.kind == "xid":
        return isinstance(r, Health) and str(r.code) == str(d.get("code")) and str(r.device) == str(d.get("device"))
    if fault.kind == "network-degrade":
        return ev == "health" and r.source == "link"
    if fault.kind == "straggler":
        return isinstance(r, Health) and r.source == "straggler" and r.slow_rank in (d.get("ranks") or [])
    return True


def compute_recovery(history: History, fault: FaultRecord, until: float | None = None,
                     others: Sequence[FaultRecord] = ()) -> dict[str, Any]:
    """Figures for one fault injected at ``fault.t_inject``; a figure is None when it never happened.

    ``until``: look no further than this time (a game day's next, independent fault: the restart it
    causes is not this fault's). Unset for scripted experiments, whose later faults may be the very
    thing that reveals an earlier latent one (a corrupted checkpoint found at the next restart).
    ``others``: the run's other injected faults; what they did is not credited to this one's detection.
    """
    t0 = fault.t_inject or 0.0
    if until is not None:
        history = History([r for r in history.records if r.t <= until], history.malformed,
                          history.relabel)
    before, seen_by = _attempt_at(history, t0)
    figures: dict[str, Any] = {k: None for k in FIGURES}
    figures.update(attempt_before=before, attempt_after=None, resumed_from_step=None, evidence={},
                   **{k: None for k in LANDING})
    if before is None:
        figures["unjudgeable"] = ("the fault fired before any rank of the job had started, so there was no "
                                  "running job to recover; trigger it later (at_step, on_event: start)")
        return figures
    pre_max = history.max_step(until=t0)
    figures["pre_fault_max_step"] = pre_max
    evidence: dict[str, str] = figures["evidence"]
    _landing(history, fault, before, t0, figures)
    if seen_by == "worker_spawn":
        evidence["attempt_before"] = "worker spawn seen by the harness (the workload sent no start)"

    figures["step_rate"] = _step_rate(history, before, t0, fault.t_release or fault.t_revert)

    # A fault released on a timer (a hang for duration_s) must be acted on before it is released.
    reaction = _reaction(history, fault, before, fault.t_release, [o for o in others if o is not fault])
    if reaction is not None:
        figures["detect_s"] = _delta(reaction.t, t0)
        evidence["detect_s"] = _describe(reaction)
    in_step.caught(history, fault, before, reaction, figures)

    later = [r for r in history.records if r.t > t0]
    restart = next((r for r in later if r.ev == "start" and str(r.attempt) != before), None)
    if restart is None:
        restart = next((r for r in later if isinstance(r, WorkerSpawn) and r.harness and str(r.attempt) != before),
                       None)
        if restart is not None and history.of("start"):
            # The workload says `start` once a rank is in the process group: a spawn that never said it
            # is a restart that never joined (stuck in rendezvous or init), not a restart.
            figures["attempt_after"] = str(restart.attempt)
            evidence["restart_s"] = (f"attempt {restart.attempt} was spawned ({_describe(restart)}) but no "
                                     f"rank of it sent start: it never joined the process group")
            restart = None
    if restart is None:
        _slurm_requeue(history, t0, figures)
        return figures
    after = str(restart.attempt)
    figures["attempt_after"] = after
    figures["restart_s"] = _delta(restart.t, t0)
    evidence["restart_s"] = _describe(restart)
    steps = [r for r in later if r.ev == "step" and str(r.attempt) == after]
    done = None if steps else _nothing_left(later, after)
    if steps:
        figures["resume_s"] = _delta(steps[0].t, t0)
        evidence["resume_s"] = _describe(steps[0])
    elif done is not None:
        figures["resume_s"] = _delta(done.t, t0)
        evidence["resume_s"] = (f"{_describe(done)}: the last step's checkpoint, so attempt {after} had no step left "
                                f"to train and wrote its final")
    # By name, as before: ``Step.step`` insists on the number the protocol requires, and a hand-built step may lack it.
    regain = next((r for r in later if r.ev == "step" and str(r.attempt) != before
                   and int(r.get("step", 0)) >= pre_max), None)
    if regain is None and done is not None and int(done.step or 0) >= pre_max:
        regain = done
    if regain is not None:
        figures["regain_s"] = _delta(regain.t, t0)
        evidence["regain_s"] = _describe(regain)
    loads = [int(r.step or 0) for r in later if r.ev == "ckpt_load" and str(r.attempt) == after]
    how = ""
    if loads:
        figures["resumed_from_step"] = min(loads)
        how = "ckpt_load of the next attempt"
    elif steps:
        # No ckpt_load: the step before the first one the next attempt ran is where it resumed.
        figures["resumed_from_step"] = max(0, min(int(r.step) for r in steps) - 1)
        how = f"inferred from the first step of attempt {after} (no ckpt_load)"
    resumed = figures["resumed_from_step"]
    if resumed is not None:
        durable = figures["durable_step"]
        if durable is None:
            evidence["lost_steps"] = f"unknown: {evidence['durable_step']}; resumed from step {resumed} ({how})"
        else:
            # A resume from the newest durable checkpoint (or a newer one, saved after the fault) loses nothing.
            figures["lost_steps"] = max(0, durable - resumed)
            evidence["lost_steps"] = (f"resumed from step {resumed} ({how}); newest durable checkpoint at the "
                                      f"fault: step {durable}")
    _slurm_requeue(history, t0, figures)
    return figures


def _nothing_left(later: list[Record], attempt: str) -> Record | None:
    """The ``ckpt_load`` of an attempt that ran no step because it loaded the last one (restarted right
    after committing it): its ``final`` names the loaded step. None for any other attempt without steps."""
    loads = [r for r in later if r.ev == "ckpt_load" and str(r.attempt) == attempt]
    finals = [r for r in later if r.ev == "final" and str(r.attempt) == attempt]
    if not loads or not finals:
        return None
    last = max(loads, key=lambda r: r.t)
    step = last.step
    # A final's step by name: ``Final.step`` insists on it, and a final without one names no step here.
    if not isinstance(step, int) or step <= 0 or any(f.get("step") != step for f in finals):
        return None
    return last


_AT_STEP = re.compile(r"at_step (\d+)")


def _landing(history: History, fault: FaultRecord, attempt: str, t0: float, figures: dict[str, Any]) -> None:
    """Where the fault landed: the running attempt's highest step at ``t0`` (None before its first step),
    the step an ``at_step`` trigger asked for, and the newest durable checkpoint then (``_durable_step``)."""
    steps = [int(r.step) for r in history.of("step", attempt=attempt) if r.t <= t0]
    landed = max(steps) if steps else None
    asked = fault.details.get("trigger_step")
    if not isinstance(asked, int):
        # Journals written before the runner recorded the asked step: read it from the trigger's description.
        parsed = _AT_STEP.fullmatch(str(fault.details.get("trigger") or ""))
        asked = int(parsed.group(1)) if parsed else None
    durable, why = _durable_step(history, t0)
    figures.update(landed_step=landed, trigger_step=asked, durable_step=durable,
                   steps_since_ckpt=None if landed is None or durable is None else max(0, landed - durable))
    figures["evidence"]["durable_step"] = why
    # A fault inside the step (chaos.instep) acts in a step of its own, which the ranks it acted on report.
    in_step.landing(history, fault, attempt, figures)


def _durable_step(history: History, t0: float) -> tuple[int | None, str]:
    """The step of the newest checkpoint durable when the fault acted, and why: the newest step with a
    ``ckpt_commit`` before ``t0`` from every rank of its attempt that commits (a save only some ranks had
    committed when the fault struck is not whole); 0 for a workload that speaks the protocol and had
    committed nothing yet; None when the run has no ``ckpt_commit`` at all (a workload seen from outside,
    or one that does not report its saves): which checkpoint was durable is then unknown, not guessed."""
    if not history.of("ckpt_commit"):
        return None, ("the run reported no ckpt_commit, so which checkpoint was durable at the fault is unknown "
                      "(report saves with chaos.sdk's ckpt_commit or a chaos.integrations callback)")
    commits = [r for r in history.of("ckpt_commit") if r.t <= t0 and isinstance(r.step, int)]
    if not commits:
        return 0, "no ckpt_commit before the fault: a fresh start was the newest durable state"
    ranks: dict[str, set[Any]] = {}
    by_step: dict[tuple[str, int], set[Any]] = {}
    for r in commits:
        attempt = str(r.attempt)
        ranks.setdefault(attempt, set()).add(r.rank)
        by_step.setdefault((attempt, r.step), set()).add(r.rank)
    whole = [(step, attempt) for (attempt, step), who in by_step.items() if who >= ranks[attempt]]
    step, attempt = max(whole, default=(0, ""))
    why = f"ckpt_commit of step {step} in attempt {attempt}" if attempt else "no whole ckpt_commit before the fault"
    torn = sorted(s for (a, s), who in by_step.items() if s > step and not who >= ranks[a])
    if torn:
        why += f"; step {torn[-1]} was committed by only some ranks when the fault acted"
    return step, why


def describe_landing(label: str, recovery: dict[str, Any]) -> str | None:
    """One line for people: ``kill-rank#0 landed at step 19 (trigger asked 17, 2 later); 4 step(s) past the
    newest durable checkpoint (step 15)``. None for a fault with no landing figures (not injected, or a
    journal written before they existed)."""
    if "landed_step" not in recovery or recovery.get("attempt_before") is None:
        return None
    landed, asked = recovery.get("landed_step"), recovery.get("trigger_step")
    text = f"{label} landed at step {landed}" if landed is not None else f"{label} landed before its attempt's first step"
    if asked is not None:
        off = "" if landed is None or landed == asked else f", {abs(landed - asked)} {'later' if landed > asked else 'earlier'}"
        text += f" (trigger asked {asked}{off})"
    if recovery.get("acted_step") is not None:
        text += f"; acted inside step {recovery['acted_step']}"
    if recovery.get("oom_kills") is not None:
        kills = recovery["oom_kills"]
        text += (f"; the kernel's OOM killer ended it ({kills} kill(s) counted by its memory cgroup)" if kills
                 else "; its memory cgroup counted no OOM kill")
    durable, since = recovery.get("durable_step"), recovery.get("steps_since_ckpt")
    if since is not None:
        text += f"; {since} step(s) past the newest durable checkpoint (step {durable})"
    elif durable is None:
        text += "; newest durable checkpoint unknown (no ckpt_commit reported)"
    return text


RATE_WINDOW_S = 10.0
"""How far before the fault the normal step rate is taken, and after it the rate of a fault with no duration."""


def _step_rate(history: History, attempt: str, t0: float, t_end: float | None) -> dict[str, Any] | None:
    """Steps per second of ``attempt`` before the fault and while it acted (a straggler, a slow link): slow is
    a failure too. ``during`` ends at the fault's release (or RATE_WINDOW_S after it) or the attempt's end."""
    first: dict[int, float] = {}
    for r in history.of("step", attempt=attempt):
        if isinstance(r.get("step"), int):  # ``Step.step`` insists on the number; a step without one is skipped
            first[r.step] = min(first.get(r.step, r.t), r.t)
    times = sorted(first.values())
    end = t_end if t_end is not None and t_end > t0 else t0 + RATE_WINDOW_S
    pre = [t for t in times if t0 - RATE_WINDOW_S <= t <= t0]
    during = [t for t in times if t0 < t <= end]
    if len(pre) < 3 or pre[-1] <= pre[0]:
        return None
    before = (len(pre) - 1) / (pre[-1] - pre[0])
    rate = len(during) / (end - t0)
    return {"before": round(before, 3), "during": round(rate, 3), "ratio": round(rate / before, 3),
            "window_s": round(end - t0, 3)}


def _slurm_requeue(history: History, t0: float, figures: dict[str, Any]) -> None:
    """requeue_s: from the fault until Slurm ran the job again after requeueing it (scontrol's
    Restarts grew and the state is RUNNING), as the harness saw it polling ``scontrol show job``;
    requeue_share: that time over resume_s, the part of the recovery Slurm's own path took
    (detecting the loss, requeueing, holding, scheduling) rather than torchrun and the workload.
    Absent when the job was not a Slurm job; None when Slurm never requeued it (the job recovered
    inside its allocation, e.g. torchrun restarted the ranks)."""
    jobs = history.harness(SlurmJob)
    if not jobs:
        return
    figures.update({k: None for k in SLURM_FIGURES})
    before = [r for r in jobs if r.t <= t0]
    restarts = (before[-1].restarts or 0) if before else 0
    back = next((r for r in jobs if r.t > t0 and r.state == "RUNNING" and (r.restarts or 0) > restarts), None)
    if back is None:
        return
    figures["requeue_s"] = _delta(back.t, t0)
    figures["evidence"]["requeue_s"] = (f"scontrol show job: job {back.job_id} RUNNING again on "
                                        f"{back.nodes} after restart {back.restarts} (polled every 0.25 s)")
    if figures.get("resume_s"):
        figures["requeue_share"] = round(figures["requeue_s"] / figures["resume_s"], 3)


def _describe(record: Record) -> str:
    ev = record.ev
    if ev == "step" and record.source == "output":
        return f"step {record.get('step')} matched by step_regex on the output (seen from outside)"
    if isinstance(record, (WorkerSpawn, WorkerExit)):
        return f"{ev} of rank {record.rank} pid {record.worker_pid} (seen from outside)"
    return f"{ev} of rank {record.rank}, attempt {record.attempt}"


def _delta(t: float | None, t0: float) -> float | None:
    return None if t is None else round(max(0.0, t - t0), 3)
