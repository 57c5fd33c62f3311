"""Goodput: the run's wall time split into productive training and badput by cause, from its own history.

The split is a partition of [launch, exit] into consecutive segments, so the parts add up to the wall
time by construction; each segment's boundaries are records the run wrote (a step, a worker exit, a
``start``, a ``ckpt_load``), and each cause says which records bound it (``HOW``). Time a step took
is *productive* when it trained a step no attempt had reached before, *recompute* when it redid a
step that a restore threw away; checkpoint saves are carved out of the steps they interrupted; the
part of a step beyond ``SLOW_FACTOR`` times the run's median step is *slow*.

Badput between two attempts is charged to the fault that ended the first one (the last fault
injected before the job noticed), so each fault category gets its own bill. A drop-replica job
(torchft's replica groups, whose recovery stops no world) is split on the quorum's timeline instead
(chaos.evidence.goodput_replicas).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from chaos.evidence.events import History, Record, attempt_key
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.goodput_replicas import compute_replica_goodput, is_replica_job
from chaos.evidence.segments import SLOW_FACTOR, Segment, median_step

CAUSES = ("productive", "slow", "recompute", "ckpt_save", "startup", "detection", "restart", "ckpt_load",
          "shutdown", "unrecovered")
HOW = {
    "productive": "step events of steps no attempt had reached before, at up to 1.5x the median step",
    "slow": "the part of a step beyond 1.5x the run's median step (stragglers, contention, a first step's warm-up)",
    "recompute": "step events of steps an earlier attempt had already reached (work a restore threw away)",
    "ckpt_save": "ckpt_begin to the last rank's ckpt_commit (or ckpt_error), carved out of the step it interrupted; "
                 "for an asynchronous save (ckpt_staged), only its staging: its write overlapped training",
    "startup": "launch to every rank of the first attempt sending start",
    "detection": "the last step before an attempt stopped to the first sign the job noticed (worker exit, health "
                 "event, a new worker): a dead or hung job before anyone acted; in a drop-replica job (torchft), the "
                 "survivors' pause after a fault, until the quorum went on without the lost group",
    "restart": "that sign to every rank of the next attempt sending start (restart, rendezvous, process start); in a "
               "drop-replica job, only from the moment no replica group was left running to the quorum's next step",
    "ckpt_load": "every rank started to the last ckpt_load of that attempt; in a drop-replica job, the survivors' "
                 "pause while a returning group healed from them",
    "shutdown": "the last step of a finished run to the harness seeing the job exit (final save, digest, teardown)",
    "unrecovered": "the last step of a run that did not finish to its end (timeout, stop rule, crash)",
}


@dataclass
class Goodput:
    """The split, the segments it came from, and what each fault cost."""

    wall_s: float
    seconds: dict[str, float]
    segments: list[Segment] = field(default_factory=list)
    by_fault: dict[str, dict[str, float]] = field(default_factory=dict)
    median_step_s: float | None = None
    problems: list[str] = field(default_factory=list)
    """What the split could not see (no launch record, no steps): a split with problems is not evidence."""

    @property
    def goodput(self) -> float | None:
        return self.seconds.get("productive", 0.0) / self.wall_s if self.wall_s > 0 else None

    def merged(self) -> list[Segment]:
        """Adjacent segments of one cause, attempt and fault as one (a run of productive steps is one bar)."""
        out: list[Segment] = []
        for s in self.segments:
            last = out[-1] if out else None
            if last is not None and (last.cause, last.attempt, last.fault) == (s.cause, s.attempt, s.fault) \
                    and abs(last.t1 - s.t0) < 1e-9:
                out[-1] = Segment(last.t0, s.t1, s.cause, s.attempt, s.fault)
            else:
                out.append(s)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 3), "goodput": None if self.goodput is None else round(self.goodput, 4),
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                "by_fault": {f: {k: round(v, 3) for k, v in c.items()} for f, c in self.by_fault.items()},
                "median_step_s": None if self.median_step_s is None else round(self.median_step_s, 4),
                "how": HOW, "problems": self.problems}


@dataclass
class _Attempt:
    spawn: float | None = None
    joined: float | None = None
    loads: list[tuple[float, int]] = field(default_factory=list)
    steps: list[tuple[float, int]] = field(default_factory=list)
    """Every rank's step records, (time, step), in time order."""

    def runs(self) -> tuple[list[tuple[float, float]], list[dict[int, float]]]:
        """The attempt's in-process reloads (a rollback: a ckpt_load after its first step), each as (first,
        last) rank's load time, and its steps split at them: before the first reload, between reloads,
        after the last. Each part maps a step to when its first rank reported it; a step trained again
        after a rollback is in a later part."""
        first_step = self.steps[0][0] if self.steps else None
        times = sorted(t for t, _step in self.loads if first_step is not None and t > first_step)
        reloads: list[list[float]] = []
        for t in times:  # the ranks' loads of one rollback: no step reported between them
            if reloads and not any(reloads[-1][1] < st <= t for st, _ in self.steps):
                reloads[-1][1] = t
            else:
                reloads.append([t, t])
        parts: list[dict[int, float]] = [{} for _ in range(len(reloads) + 1)]
        for t, step in self.steps:
            k = sum(1 for first, _last in reloads if t >= first)
            parts[k].setdefault(step, t)
        return [(a, b) for a, b in reloads], parts


def _index(history: History) -> tuple[dict[str, _Attempt], list[Record]]:
    """One pass over the history: each attempt's marks, and the records that can show a stop was noticed."""
    attempts: dict[str, _Attempt] = {}
    signs: list[Record] = []
    for r in history.records:
        ev, attempt = r.get("ev"), r.get("attempt")
        if ev in ("worker_exit", "health", "ckpt_reject", "worker_spawn", "start"):
            signs.append(r)
        if attempt is None or ev not in ("worker_spawn", "start", "ckpt_load", "step"):
            continue
        a = attempts.setdefault(str(attempt), _Attempt())
        t = r["t"]
        if ev == "worker_spawn":
            a.spawn = t if a.spawn is None else min(a.spawn, t)
        elif ev == "start":
            a.joined = t if a.joined is None else max(a.joined, t)
        elif ev == "ckpt_load":
            a.loads.append((t, int(r.get("step") or 0)))
        elif isinstance(r.get("step"), int):
            a.steps.append((t, r["step"]))
    return attempts, signs


def _first_sign(signs: list[Record], times: list[float], after: float, attempt: str, victims: set[int]) -> float | None:
    """The first record after ``after`` showing the stop was noticed: a worker exit (not the fault's own
    victim), a health event, a rejected checkpoint, or the next attempt's first worker or rank."""
    for r in signs[bisect.bisect_right(times, after):]:
        ev = r.get("ev")
        if (ev == "worker_exit" and r.get("worker_pid") not in victims) or ev in ("health", "ckpt_reject") \
                or (ev in ("worker_spawn", "start") and str(r.get("attempt")) == attempt):
            return r["t"]
    return None


def compute_goodput(history: History, faults: list[FaultRecord] | None = None, *,
                    now: float | None = None, launched: float | None = None) -> Goodput:
    """Split [launch, exit] of the run in ``history`` into the causes of ``CAUSES``.

    ``now``, ``launched``: a run still going (a live view, whose history holds only the workload's
    records) is split from ``launched`` up to ``now``, its open end as 'unrecovered'. Linear in the
    history (a live view recomputes it while a long game day runs).
    """
    launches = history.of("launch")
    exits = history.of("exit")
    problems = []
    if not (launches or launched is not None) or (not exits and now is None):
        problems.append("the history has no launch or no exit record of the harness: the run's wall time is unknown")
        return Goodput(0.0, {c: 0.0 for c in CAUSES}, problems=problems)
    T0 = launches[0]["t"] if launches else launched
    T1 = exits[-1]["t"] if exits else now
    finished = bool(history.finals()) and bool(exits) and exits[-1].get("code") == 0
    if is_replica_job(history):
        segments, steps_seen = compute_replica_goodput(history, faults or [], T0, T1, finished)
    else:
        segments, steps_seen = _attempts_in_turn(history, faults or [], T0, T1, finished)
    if not steps_seen:
        problems.append("no step events: nothing to call productive (does the workload speak the protocol, or "
                        "set workload.step_regex?)")
    segments = _carve_saves(segments, history)
    median = median_step(segments)
    if median is not None:
        segments = _split_slow(segments, median)
    seconds = {c: 0.0 for c in CAUSES}
    by_fault: dict[str, dict[str, float]] = {}
    for s in segments:
        seconds[s.cause] += s.seconds
        if s.fault is not None:
            bill = by_fault.setdefault(s.fault, {})
            bill[s.cause] = bill.get(s.cause, 0.0) + s.seconds
    return Goodput(T1 - T0, seconds, segments, by_fault, median, problems)


def _attempts_in_turn(history: History, faults: list[FaultRecord], T0: float, T1: float,
                      finished: bool) -> tuple[list[Segment], bool]:
    """(segments, steps_seen) of a job whose attempts follow one another (a restart stops the world)."""
    injected = sorted((f for f in faults if f.injected and f.t_inject is not None), key=lambda f: f.t_inject)
    by_attempt, signs = _index(history)
    sign_times = [r["t"] for r in signs]
    segments: list[Segment] = []
    cursor = T0
    step_began = float("-inf")  # where the latest step segment began

    def add(t: float | None, cause: str, attempt: str | None = None, fault: str | None = None) -> None:
        nonlocal cursor
        if t is None:
            return
        t = min(max(t, cursor), T1)
        if t > cursor:
            segments.append(Segment(cursor, t, cause, attempt, fault))
            cursor = t

    high_water = 0
    attempts = sorted(by_attempt, key=attempt_key)
    steps_seen = False
    for n, attempt in enumerate(attempts):
        a = by_attempt[attempt]
        loads = [(t, step) for t, step in a.loads if a.joined is None or t >= a.joined]
        if n == 0:
            add(a.joined if a.joined is not None else a.spawn, "startup", attempt)
        else:
            stopped_at = cursor
            until = a.spawn or a.joined or T1
            fault = next((f for f in reversed(injected) if f.t_inject <= until), None)
            if fault is not None and fault.t_inject < step_began:
                fault = None  # injected before the step that was running when the job stopped: it did not stop it
            charged = fault.label if fault is not None else None
            # The exit of the process the fault itself killed is the fault, not the job noticing it.
            victims = {int(p) for p in fault.details.get("pids", [])} if fault is not None else set()
            add(_first_sign(signs, sign_times, stopped_at, attempt, victims), "detection", attempt, charged)
            add(a.joined if a.joined is not None else a.spawn, "restart", attempt, charged)
        # The attempt's resume is its loads before its first step; a load after that is an in-process
        # rollback, billed where it happened among the steps, not stretched back over the steps before it.
        first_step = a.steps[0][0] if a.steps else None
        resume = [(t, step) for t, step in loads if first_step is None or t <= first_step]
        if any(step > 0 for _t, step in resume):
            add(max(t for t, _s in resume), "ckpt_load", attempt, segments[-1].fault if segments and n else None)
        charged_now = segments[-1].fault if n and segments else None
        reloads, parts = a.runs()
        for k, part in enumerate(parts):
            if k:
                add(reloads[k - 1][1], "ckpt_load", attempt, charged_now)
            for step, t in sorted(part.items(), key=lambda kv: kv[1]):
                steps_seen = True
                began = cursor
                if step <= high_water:
                    add(t, "recompute", attempt, charged_now)
                else:
                    add(t, "productive", attempt)
                    high_water = step
                if cursor > began:
                    step_began = began
    add(T1, "shutdown" if finished else "unrecovered", attempts[-1] if attempts else None)
    return segments, steps_seen


def save_windows(history: History, *, committed_only: bool = False) -> dict[tuple[str, Any], tuple[float, float]]:
    """(attempt, step) -> (first rank's ckpt_begin, last rank's ckpt_commit or ckpt_error): how long a save held training."""
    windows: dict[tuple[str, Any], list[float]] = {}
    for r in history.of("ckpt_begin"):
        key = (str(r.get("attempt")), r.get("step"))
        w = windows.setdefault(key, [r["t"], r["t"]])
        w[0] = min(w[0], r["t"])
    ended: set[tuple[str, Any]] = set()
    for r in history.of("ckpt_commit") if committed_only else history.of("ckpt_commit", "ckpt_error"):
        key = (str(r.get("attempt")), r.get("step"))
        if key in windows:
            windows[key][1] = max(windows[key][1], r["t"])
            ended.add(key)
    return {k: (w[0], w[1]) for k, w in windows.items() if k in ended}


STAGED_BEFORE_BEGIN_S = 1.0
"""How long before a rank's ``ckpt_begin`` its ``ckpt_staged`` may come: the writer starts as soon as the copy is made."""


def blocking_windows(history: History, *, committed_only: bool = False) -> dict[tuple[str, Any], tuple[float, float]]:
    """(attempt, step) -> the time each save held training. A save held it from ``ckpt_begin`` to the last rank's
    ``ckpt_commit`` (or ``ckpt_error``), as ``save_windows`` says, unless it proves it was asynchronous: every rank
    that began it reported its staging (``ckpt_staged``, a valid length, just before that rank's ``ckpt_begin``)
    and the job reported a step while it was being written. Then it held training only while staged, on each rank
    from ``t - seconds`` to ``t``: its write overlapped training and is no badput. Anything less (a staging record
    for a save no step overlapped, one rank without one, a record away from its begin) bills the whole write.
    The staging's length is the workload's word; one that blocked longer lengthens its step, which the slow-step
    rule then bills."""
    begins: dict[tuple[str, Any], dict[Any, float]] = {}
    for r in history.of("ckpt_begin"):
        ranks = begins.setdefault((str(r.get("attempt")), r.get("step")), {})
        ranks[r.get("rank")] = min(ranks.get(r.get("rank"), r["t"]), r["t"])
    staged: dict[tuple[str, Any], dict[Any, tuple[float, float]]] = {}
    for r in history.of("ckpt_staged"):
        secs, key = r.get("seconds"), (str(r.get("attempt")), r.get("step"))
        begin = begins.get(key, {}).get(r.get("rank"))
        if not isinstance(secs, (int, float)) or isinstance(secs, bool) or not 0 <= secs < float("inf"):
            continue
        if begin is None or not begin - STAGED_BEFORE_BEGIN_S <= r["t"] <= begin + 0.05:
            continue
        staged.setdefault(key, {})[r.get("rank")] = (r["t"] - secs, r["t"])
    out = {}
    for key, (b, e) in save_windows(history, committed_only=committed_only).items():
        ranks = staged.get(key, {})
        overlapped = any(b < r["t"] < e for r in history.of("step", attempt=key[0]))
        if overlapped and set(begins.get(key, {})) <= set(ranks):
            out[key] = (min(w[0] for w in ranks.values()), max(w[1] for w in ranks.values()))
        else:
            out[key] = (b, e)
    return out


def _carve_saves(segments: list[Segment], history: History) -> list[Segment]:
    """Cut each save's blocking window out of the training segments it overlaps (one sweep: both are in time order)."""
    carvable = ("productive", "recompute", "shutdown", "slow")
    windows = sorted((b, e) for b, e in blocking_windows(history).values() if e > b)
    out: list[Segment] = []
    w = 0
    for s in segments:
        if s.cause not in carvable:
            out.append(s)
            continue
        while w < len(windows) and windows[w][1] <= s.t0:
            w += 1
        pos, k = s.t0, w
        while k < len(windows) and windows[k][0] < s.t1:
            lo, hi = max(windows[k][0], pos), min(windows[k][1], s.t1)
            if hi > lo:
                if lo > pos:
                    out.append(Segment(pos, lo, s.cause, s.attempt, s.fault))
                out.append(Segment(lo, hi, "ckpt_save", s.attempt, s.fault))
                pos = hi
            k += 1
        if s.t1 > pos:
            out.append(Segment(pos, s.t1, s.cause, s.attempt, s.fault))
    return out


def _split_slow(segments: list[Segment], median: float) -> list[Segment]:
    out = []
    for s in segments:
        if s.cause in ("productive", "recompute") and s.seconds > SLOW_FACTOR * median:
            cut = s.t0 + SLOW_FACTOR * median
            out.append(Segment(s.t0, cut, s.cause, s.attempt, s.fault))
            out.append(Segment(cut, s.t1, "slow", s.attempt, s.fault))
        else:
            out.append(s)
    return out
