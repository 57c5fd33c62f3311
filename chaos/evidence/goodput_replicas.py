"""Goodput of a drop-replica job (torchft): the job trains on while replica groups come and go.

The split of chaos.evidence.goodput walks the attempts one after another, the shape of a job whose
recovery stops the world. A drop-replica job has no such sequence: each replica group is its own
torchrun with its own attempts, a lost group is dropped from the quorum while the others train on,
and a returning one heals from a live peer and joins again. Its timeline is the quorum's: a step is
trained when the first group reports it, and the time between two new steps is productive up to
``SLOW_FACTOR`` times the median step. Beyond that a pause is charged to its cause:

- *detection*, to the fault injected in or just before the pause while some group stayed up: the
  survivors waiting for the quorum to go on without the lost group (the lighthouse's heartbeat timeout);
- *ckpt_load*, to the latest fault, when a group healed (its ``heal``) in the pause: the survivors
  serving their state to the returning group;
- *restart*, to the latest fault, from the moment no group was left running (every process exited) to
  the quorum's next step: the stop-the-world restart a drop-replica job exists to avoid;
- *slow* otherwise.

A group's steps that others had already reported (a healed group catching up, the groups in lockstep)
add no time: the quorum's timeline has already counted them.
"""

from __future__ import annotations

import re
from typing import Any

from chaos.evidence.events import History, Record
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.segments import SLOW_FACTOR, Segment, median_step

NODE = re.compile(r"^rg(\d+)$")


def is_replica_job(history: History) -> bool:
    """Does the history come from replica groups (the torchft target's nodes ``rg<k>``, or steps that say their
    group)? One pass, stopping at the first sign."""
    for r in history.records:
        ev = r.get("ev")
        if ev == "worker_spawn" and r.get("source") == "harness" and NODE.match(str(r.get("node") or "")):
            return True
        if ev == "step" and isinstance(r.get("replica_group"), int) and not isinstance(r.get("replica_group"), bool):
            return True
    return False


def _live(history: History) -> list[tuple[float, float]]:
    """Each worker process's life (spawn to exit, as the harness saw it; to the end if it never exited)."""
    spawned: dict[Any, float] = {}
    exited: dict[Any, float] = {}
    for r in history.records:
        if r.get("source") != "harness":
            continue
        if r.get("ev") == "worker_spawn":
            spawned.setdefault(r.get("worker_pid"), r["t"])
        elif r.get("ev") == "worker_exit":
            exited[r.get("worker_pid")] = r["t"]
    return [(t, exited.get(pid, float("inf"))) for pid, t in spawned.items()]


def _nobody_running(lives: list[tuple[float, float]], t0: float, t1: float) -> tuple[float, float] | None:
    """The first stretch inside (t0, t1) in which no worker process was alive, if any."""
    edges = sorted({t0, t1, *(a for a, _ in lives if t0 < a < t1), *(b for _, b in lives if t0 < b < t1)})
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        if not any(s <= mid < e for s, e in lives):
            end = min((s for s, _ in lives if s >= b), default=t1)
            return a, min(end, t1)
    return None


def compute_replica_goodput(history: History, faults: list[FaultRecord], T0: float, T1: float,
                            finished: bool) -> tuple[list[Segment], bool]:
    """(segments, steps_seen) of [T0, T1] for a drop-replica job, before saves are carved out and slow steps split
    (chaos.evidence.goodput does both, as for any job)."""
    steps: list[Record] = sorted((r for r in history.of("step") if isinstance(r.get("step"), int)), key=lambda r: r.t)
    new: list[Record] = []
    high = None
    for r in steps:
        if high is None or r["step"] > high:
            new.append(r)
            high = r["step"]
    injected = sorted((f for f in faults if f.injected and f.t_inject is not None), key=lambda f: float(f.t_inject))
    heals = sorted(r.t for r in history.of("heal"))
    lives = _live(history)
    segments: list[Segment] = []
    if not new:
        segments.append(Segment(T0, T1, "unrecovered"))
        return segments, False
    first = new[0].t
    starts = [r.t for r in history.of("start") if r.t <= first]
    up = max(starts) if starts else first
    if up > T0:
        segments.append(Segment(T0, up, "startup"))
    spans = [Segment(a.t, b.t, "productive") for a, b in zip(new, new[1:])]
    median = median_step(spans)
    cursor = up
    for r in new:
        t = min(max(r.t, cursor), T1)
        if t <= cursor:
            continue
        bound = cursor + (SLOW_FACTOR * median if median is not None else t - cursor)
        if t <= bound:
            segments.append(Segment(cursor, t, "productive"))
        else:
            segments.append(Segment(cursor, bound, "productive"))
            segments.extend(_pause(bound, t, injected, heals, lives, median or 0.0))
        cursor = t
    if T1 > cursor:
        segments.append(Segment(cursor, T1, "shutdown" if finished else "unrecovered"))
    return segments, True


def _pause(t0: float, t1: float, injected: list[FaultRecord], heals: list[float],
           lives: list[tuple[float, float]], median: float) -> list[Segment]:
    """The part of a step beyond the slow bound, [t0, t1], charged to its cause (the module docstring)."""
    before = [f for f in injected if float(f.t_inject) <= t1]
    latest = before[-1].label if before else None
    # A fault that struck during the step (or within a slow step before it) stopped the quorum.
    struck = [f for f in before if float(f.t_inject) >= t0 - 2 * SLOW_FACTOR * median]
    gap = _nobody_running(lives, t0, t1)
    if gap is not None and latest is not None:
        # Every group down: from then to the quorum's next step is a restart of the whole job (new processes,
        # their start-up, their resume), the stop-the-world a drop-replica job exists to avoid.
        out = [Segment(t0, gap[0], "detection", None, latest)] if gap[0] > t0 else []
        out.append(Segment(gap[0], t1, "restart", None, latest))
        return out
    if struck:
        return [Segment(t0, t1, "detection", None, struck[-1].label)]
    if latest is not None and any(t0 - 2 * SLOW_FACTOR * median <= h <= t1 for h in heals):
        return [Segment(t0, t1, "ckpt_load", None, latest)]
    return [Segment(t0, t1, "slow")]
