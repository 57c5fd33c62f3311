"""What the history says about a fault inside the step: where it acted, in which step the job caught it,
and whether any rank was left waiting (docs/instep.md).

- ``acted_step``: the first step a rank reports acting in (its ``instep`` event); ``oom_kills``: the kernel's
  own count of kills in the memory cgroup a host OOM put the rank in.
- ``detect_step`` / ``detect_steps``: the step the job's reaction came in, counted as the step it was computing
  then (the step a health event names, and never before the one after the highest step its attempt had
  reported by then: a step reported complete was trained on; an abort, the step after the highest
  reported) and how many steps after ``acted_step`` that is: the steps completed with the fault in
  them. 0 for a guard that catches it in the step it acted in, before the optimizer applies it; a
  replica check after step 25 of a flip that acted in step 23 counts 3 (steps 23-25).
- ``settled_s`` / ``waiting_ranks``: an OOM or a failed collective on one rank must not leave the others
  waiting in a collective. Every rank of the struck attempt is settled once it exited (the harness saw its
  worker go) or reported a step past ``acted_step`` (it trained on); ``settled_s`` is when the last one
  was, after the fault, and ``waiting_ranks`` those that never were before the run ended.
"""

from __future__ import annotations

from typing import Any

from chaos.evidence.events import History, Record
from chaos.evidence.fault_record import FaultRecord


KINDS = ("nan", "loss-spike", "bitflip", "oom", "collective-error", "nvrx-fault")
"""The faults that act inside the training step (chaos.faults with ``in_step``)."""


def named_by(fault: FaultRecord) -> list[str] | None:
    """The health-event codes that name ``fault``'s class, as recorded with its injection; None where the
    journal holds no usable list (not an in-step fault, or a record written before it was kept)."""
    raw = fault.details.get("named_by")
    if not isinstance(raw, list) or not all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in raw):
        return None
    return [str(c) for c in raw]


def applies(fault: FaultRecord) -> bool:
    """Is ``fault`` one that acts inside the step (its kind, or its injection recorded ``named_by``)?"""
    return fault.kind in KINDS or "named_by" in fault.details


def answers(r: Record, fault: FaultRecord) -> bool | None:
    """Does this health event name the in-step ``fault``'s class? None for a fault that is not in-step. An in-step
    fault without a usable ``named_by`` is named by no event (only the job's abort can show it was caught)."""
    if not applies(fault):
        return None
    codes = named_by(fault)
    return codes is not None and r.get("ev") == "health" and str(r.get("code")) in codes


def landing(history: History, fault: FaultRecord, attempt: str, figures: dict[str, Any]) -> None:
    """acted_step (in the attempt the fault struck: a persistent fault acts again after a restart, in steps
    numbered from an older checkpoint) and oom_kills, with their evidence."""
    acts = [r for r in history.of("instep") if r.get("fault") == fault.index and isinstance(r.get("step"), int)]
    acts = [r for r in acts if str(r.get("attempt")) == attempt] or acts[:1]
    kills = [r for r in history.of("oom_kill") if r.get("fault") == fault.label and isinstance(r.get("oom_kills"), int)]
    if kills:
        figures["oom_kills"] = kills[-1]["oom_kills"]
        figures["evidence"]["oom_kills"] = f"oom_kill counter of {kills[-1].get('cgroup')}"
    if acts:
        figures["acted_step"] = min(int(r["step"]) for r in acts)
        figures["evidence"]["acted_step"] = (f"instep event of rank(s) "
                                             f"{', '.join(sorted({str(r.get('rank')) for r in acts}))}, "
                                             f"attempt {acts[0].get('attempt')}")


def caught(history: History, fault: FaultRecord, attempt: str, reaction: Record | None,
           figures: dict[str, Any]) -> None:
    """detect_step, detect_steps, settled_s and waiting_ranks of an in-step fault (``figures`` has acted_step)."""
    if not applies(fault):
        return
    acted = figures.get("acted_step")
    figures.update(detect_step=None, detect_steps=None, settled_s=None, waiting_ranks=None)
    evidence = figures["evidence"]
    if reaction is not None:
        if reaction.get("attempt") is not None and str(reaction.get("attempt")) != attempt:
            evidence["detect_step"] = (f"unknown: the reaction came in attempt {reaction.get('attempt')}, not in attempt "
                                       f"{attempt} that the fault struck (its steps are counted from another checkpoint)")
        else:
            # The struck attempt's highest step reported by then: a health event claiming an earlier step than the
            # attempt had already trained cannot take the poisoned steps back.
            reported = [int(r["step"]) for r in history.of("step", attempt=attempt)
                        if isinstance(r.get("step"), int) and not isinstance(r.get("step"), bool)
                        and r.get("t", 0.0) <= reaction.get("t", 0.0)]
            claimed = reaction.get("step") if reaction.get("ev") == "health" else None
            if isinstance(claimed, int) and not isinstance(claimed, bool):
                figures["detect_step"] = max([claimed, *(s + 1 for s in reported)])
                evidence["detect_step"] = (f"the step the health event names ({claimed}), or the one after the highest "
                                           f"attempt {attempt} had completed by then, whichever is later")
            elif reported:
                figures["detect_step"] = max(reported) + 1
                evidence["detect_step"] = (f"the step attempt {attempt} was computing when it ended (the highest it "
                                           f"reported by then, plus one)")
            else:
                evidence["detect_step"] = f"unknown: attempt {attempt} reported no step before it ended"
        detect = figures["detect_step"]
        if acted is not None and detect is not None:
            if detect >= acted:
                figures["detect_steps"] = detect - acted
            else:
                evidence["detect_step"] += (f"; step {detect} is before step {acted}, where the fault acted: the "
                                            f"history contradicts itself, so the steps to detection are unknown")
                figures["detect_step"] = None
    _settled(history, fault, attempt, acted, figures)


def _settled(history: History, fault: FaultRecord, attempt: str, acted: int | None, figures: dict[str, Any]) -> None:
    t0 = fault.t_inject or 0.0
    # The workers alive when it struck: one that had already exited (a short-lived child the harness took for a
    # worker, a rank gone before) cannot be left waiting by it.
    gone = {r.get("worker_pid") for r in history.of("worker_exit", attempt=attempt) if r.get("t", 0.0) <= t0}
    spawns = {r.get("worker_pid"): r.get("rank") for r in history.of("worker_spawn", attempt=attempt)
              if r.get("worker_pid") not in gone}
    if not spawns:
        figures["evidence"]["settled_s"] = (f"unknown: the harness saw no worker of attempt {attempt} spawn (a "
                                            f"target whose ranks it does not watch)")
        return
    exits = {r.get("worker_pid"): r["t"] for r in history.of("worker_exit", attempt=attempt) if r.get("t", 0.0) > t0}
    past: dict[Any, float] = {}
    if acted is not None:
        for r in history.of("step", attempt=attempt):
            if isinstance(r.get("step"), int) and r["step"] > acted and r.get("t", 0.0) > t0:
                past.setdefault(r.get("rank"), r["t"])
    # Per worker process (a rank the harness could not name is None, and two of them are two workers); a step
    # past the landing settles only the worker of a named rank.
    settled: dict[Any, float] = {}
    waiting = []
    for pid, rank in spawns.items():
        times = [t for t in (exits.get(pid), past.get(rank) if rank is not None else None) if t is not None]
        if times:
            settled[pid] = min(times)
        else:
            waiting.append(rank)
    figures["waiting_ranks"] = sorted(waiting, key=str)
    if waiting:
        figures["evidence"]["settled_s"] = (f"rank(s) {', '.join(str(r) for r in figures['waiting_ranks'])} of "
                                            f"attempt {attempt} neither exited nor trained past step {acted} "
                                            f"before the run ended")
        return
    last = max(settled.values())
    figures["settled_s"] = round(max(0.0, last - t0), 3)
    figures["evidence"]["settled_s"] = (f"every rank of attempt {attempt} exited or trained past step {acted} "
                                        f"(the last {figures['settled_s']} s after the fault)")
