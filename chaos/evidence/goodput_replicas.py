"""Goodput of a drop-replica job (torchft): the job trains on while replica groups come and go.

The split of chaos.evidence.goodput walks the attempts one after another, the shape of a job whose
recovery stops the world. A drop-replica job has no such sequence: each replica group is its own
torchrun with its own attempts, a lost group is dropped from the quorum while the others train on,
and a returning one heals from a live peer and joins again. Its timeline is the quorum's: a step is
trained when the first group reports it, and the time between two new steps is productive up to
``SLOW_FACTOR`` times the median step. Beyond that a pause is charged to its cause:

- *restart*, from the moment no group was left running (every worker process the harness saw had
  exited) to the quorum's next step: the stop-the-world a drop-replica job exists to avoid, charged to
  the fault that struck in that step (or to none);
- *detection*, to the first fault that struck during the step (or just before it) while some group
  stayed up: the survivors waiting for the quorum to go on without the lost group (the lighthouse's
  heartbeat timeout); the part of the pause before that fault struck is *slow*;
- *ckpt_load*, when a group healed in the pause (the survivors serving their state to the returning
  group), to the latest fault before the heal that struck that group (else the latest before it);
- *slow* otherwise.

After the quorum's last new step, steps a group went on reporting (a late joiner retraining alone what the quorum
had trained) are *recompute*, charged to the latest fault before them.

Only what the harness can vouch for counts: where it saw the workers spawn, a step is counted only from
one of those processes, and only inside [launch, exit]. A group's steps that others had already reported
(a healed group catching up, the groups in lockstep) add no time: the quorum's timeline counted them.
"""

from __future__ import annotations

import re

from chaos.evidence.events import History, Record
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.segments import SLOW_FACTOR, Segment, median_step

NODE = re.compile(r"^rg(\d+)$")
"""The torchft target's node names (chaos.evidence.replica_groups has the same: importing it from there would make
an import circle through chaos.evidence.outcome)."""


def _spawns(history: History) -> list[Record]:
    return [r for r in history.records if r.get("ev") == "worker_spawn" and r.get("source") == "harness"
            and isinstance(r.get("worker_pid"), int) and not isinstance(r.get("worker_pid"), bool)]


def is_replica_job(history: History) -> bool:
    """Does the history come from replica groups? Where the harness saw workers spawn, only its word counts
    (the torchft target's nodes are ``rg<k>``); a live view holding only the workload's records falls back to
    steps that say their group."""
    spawns = _spawns(history)
    if spawns:
        return any(NODE.match(str(r.get("node") or "")) for r in spawns)
    return any(r.get("ev") == "step" and isinstance(r.get("replica_group"), int)
               and not isinstance(r.get("replica_group"), bool) for r in history.records)


def _lives(history: History) -> list[tuple[float, float]]:
    """Each worker process's life as the harness saw it: its spawn to its next exit (to the end if none), a
    process keyed by its node and pid, so a reused pid on another node or later is another life."""
    open_: dict[tuple[str, int], float] = {}
    lives: list[tuple[float, float]] = []
    for r in history.records:
        if r.get("source") != "harness" or r.get("ev") not in ("worker_spawn", "worker_exit"):
            continue
        pid = r.get("worker_pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        key = (str(r.get("node") or ""), pid)
        if r.get("ev") == "worker_spawn":
            open_.setdefault(key, r.t)
            continue
        started = open_.pop(key, None)
        if started is None:  # an exit that names no node: the open life of that pid, wherever it ran
            key = next((k for k in open_ if k[1] == pid), None)
            started = open_.pop(key) if key is not None else None
        if started is not None:
            lives.append((started, r.t))
    lives += [(t, float("inf")) for t in open_.values()]
    return lives


def _nobody_running(lives: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """When, inside (t0, t1), no worker process was alive any more (the first such moment), if ever."""
    if not lives:
        return None  # the harness saw no worker: it cannot say the job was down
    edges = sorted({t0, t1, *(a for a, _ in lives if t0 < a < t1), *(b for _, b in lives if t0 < b < t1)})
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        if not any(s <= mid < e for s, e in lives):
            return a
    return None


def compute_replica_goodput(history: History, faults: list[FaultRecord], T0: float, T1: float,
                            finished: bool) -> tuple[list[Segment], bool]:
    """(segments, steps_seen) of [T0, T1] for a drop-replica job, before saves are carved out and slow steps split
    (chaos.evidence.goodput does both, as for any job)."""
    spawns = _spawns(history)
    spawned = {r["worker_pid"] for r in spawns}
    steps = sorted((r for r in history.of("step") if isinstance(r.get("step"), int) and T0 <= r.t <= T1
                    and (not spawned or r.get("pid") in spawned)), key=lambda r: r.t)
    new: list[Record] = []
    for r in steps:
        if not new or r["step"] > new[-1]["step"]:
            new.append(r)
    injected = sorted((f for f in faults if f.injected and isinstance(f.t_inject, (int, float))),
                      key=lambda f: float(f.t_inject))  # type: ignore[arg-type]
    node_of = {r["worker_pid"]: str(r.get("node") or "") for r in spawns}
    heals = sorted((r.t, f"rg{r.get('replica_group')}") for r in history.of("heal"))
    struck_nodes = {f.label: {str(n) for n in f.details.get("nodes") or [] if isinstance(n, str)}
                    | {node_of[p] for p in f.details.get("pids") or [] if isinstance(p, int) and p in node_of}
                    for f in injected}
    lives = _lives(history)
    if not new:
        return [Segment(T0, T1, "unrecovered")], False
    segments: list[Segment] = []
    starts = [r.t for r in history.of("start") if T0 <= r.t <= new[0].t]
    up = min(max(max(starts) if starts else new[0].t, T0), T1)
    if up > T0:
        segments.append(Segment(T0, up, "startup"))
    median = median_step([Segment(a.t, b.t, "productive") for a, b in zip(new, new[1:])])
    reach = SLOW_FACTOR * (median or 0.0)
    cursor = up
    for r in new:
        t = min(max(r.t, cursor), T1)
        if t > cursor:
            segments.extend(_step(cursor, t, median, reach, injected, heals, lives, struck_nodes))
            cursor = t
    # After the quorum's last new step, a group that went on reporting steps the quorum had already trained (a late
    # joiner training alone from its own weights) redid work: recompute, charged to the latest fault before it.
    redone = sorted(r.t for r in steps if cursor < r.t <= T1)
    if redone and redone[-1] - cursor > reach:
        owner = [f for f in injected if float(f.t_inject) <= redone[-1]]  # type: ignore[arg-type]
        for t in redone:  # step by step, so that a slow one is still split off as slow
            if t > cursor:
                segments.append(Segment(cursor, t, "recompute", None, owner[-1].label if owner else None))
                cursor = t
    if T1 > cursor:
        segments.append(Segment(cursor, T1, "shutdown" if finished else "unrecovered"))
    return segments, True


def _step(t0: float, t1: float, median: float | None, reach: float, injected: list[FaultRecord],
          heals: list[tuple[float, str]], lives: list[tuple[float, float]],
          struck_nodes: dict[str, set[str]]) -> list[Segment]:
    """The time from one new step of the quorum to the next, [t0, t1], cut by its causes (the module docstring)."""
    bound = t0 + reach if median is not None else t1  # too few steps for a median: no step is called slow
    # The faults that could have stopped this step: injected while it ran, or within a slow step before it; the
    # first of them owns the pause (a later one found the job already waiting).
    struck = [f for f in injected if t0 - reach <= float(f.t_inject) <= t1]  # type: ignore[arg-type]
    charged = struck[0].label if struck else None
    # Where the fault's pause begins: past the slow bound (a step may hold a fault's moment without delay), or,
    # with no median to bound a step, where the fault struck.
    hit = None
    if struck:
        inject = float(struck[0].t_inject)  # type: ignore[arg-type]
        hit = min(max(bound if median is not None else t0, inject), t1)
    down = _nobody_running(lives, t0, t1)
    if down is not None:
        # Every group gone: from then to the quorum's next step the whole job was restarting.
        end = min(down, hit if hit is not None else bound)
        out = [Segment(t0, end, "productive")] if end > t0 else []
        if down > end:
            out.append(Segment(end, down, "detection" if charged else "slow", None, charged))
        out.append(Segment(down, t1, "restart", None, charged))
        return out
    if median is not None and t1 <= bound:
        return [Segment(t0, t1, "productive")]  # a fault may strike within a step that it does not delay
    if hit is not None:
        out = [Segment(t0, min(bound, hit), "productive")] if min(bound, hit) > t0 else []
        if hit > bound:  # a natural stall before the fault struck is not the fault's
            out.append(Segment(bound, hit, "slow"))
        out.append(Segment(hit, t1, "detection", None, charged))
        return out
    if t1 <= bound:
        return [Segment(t0, t1, "productive")]
    out = [Segment(t0, bound, "productive")]
    healed = [(h, node) for h, node in heals if t0 - reach <= h <= t1]
    if healed:
        # The survivors served a returning group its state: the fault that took that group down owns the pause
        # (the latest before the heal that struck its node; else the latest before it).
        h, node = healed[0]
        before = [f for f in injected if float(f.t_inject) <= h]  # type: ignore[arg-type]
        owner = [f for f in before if node in struck_nodes.get(f.label, set())] or before
        if owner:
            out.append(Segment(bound, t1, "ckpt_load", None, owner[-1].label))
            return out
    out.append(Segment(bound, t1, "slow"))
    return out
