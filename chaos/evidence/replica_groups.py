"""What each replica group of a drop-replica job (torchft) did: its processes, steps, heals and the faults that struck it.

A replica group's processes come and go without a job-wide restart: the harness saw each one spawn
on the group's node (``rg<k>``, chaos.targets.torchft) and each says ``replica_group`` in its own
records (chaos.integrations.torchft). The harness's word decides which group a process belongs to;
a process whose own records name another group contradicts it, and that is a finding, not a detail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chaos.evidence import in_step
from chaos.evidence.events import History, Record
from chaos.evidence.outcome import FaultRecord

NODE = re.compile(r"^rg(\d+)$")


@dataclass
class Process:
    """One process of a replica group, as the harness and its own records saw it."""

    pid: int
    group: int
    rank: int | None = None
    """Its rank within the group (a group of several processes has one per rank)."""
    started: float | None = None
    """Its ``start`` record's time (None: it never said start)."""
    spawned: float | None = None
    """When the harness saw it spawn on its group's node (None: the harness never watched it)."""
    steps: list[Record] = field(default_factory=list)
    """Its committed steps (``step`` events), in time order."""
    heals: list[Record] = field(default_factory=list)
    final: Record | None = None
    exited: float | None = None
    """When the harness saw it exit (None: it was still running at the end, or the harness never watched it)."""

    @property
    def began(self) -> float | None:
        """When it was first seen: the harness's spawn, else its own start, else its first step."""
        times = [t for t in (self.spawned, self.started) if t is not None]
        return min(times) if times else (self.steps[0].t if self.steps else None)

    def alive_at(self, t: float) -> bool:
        """It had begun by ``t`` and neither exited nor wrote its final before."""
        began = self.began
        if began is None or began > t:
            return False
        ended = self.exited if self.exited is not None else (self.final.t if self.final is not None else None)
        return ended is None or ended > t

    def training_at(self, t: float) -> bool:
        """Alive at ``t`` and past its first committed step: a member of the quorum, not still joining."""
        return self.alive_at(t) and bool(self.steps) and self.steps[0].t <= t


@dataclass
class Groups:
    processes: dict[int, Process]
    contradictions: list[str]
    landed: dict[int, list[tuple[int, float, str]]] = field(default_factory=dict)
    """Per in-step fault (its index), (pid, time, kind) of each ``instep`` record a group process wrote: where an
    in-step fault acted, which its configuration (a rank number) cannot say by itself (``struck_groups`` decides
    which of them count)."""

    def successions(self) -> list[tuple[Process, Process]]:
        """(before, after) for each process that took the place of an earlier one of the same group and rank: a
        restart or a return of the group, whatever caused it."""
        lines: dict[tuple[int, int | None], list[Process]] = {}
        for p in sorted(self.processes.values(), key=lambda p: p.began or 0.0):
            lines.setdefault((p.group, p.rank), []).append(p)
        return [(a, b) for line in lines.values() for a, b in zip(line, line[1:])]

    def size(self, group: int) -> int:
        """How many ranks the group trains with, as proven: the distinct ranks of the processes the harness saw spawn
        in it, and 1 where it saw none. A down group's credit is this many batches, so a rank's own word must not
        raise it: a record of a process the harness never saw, naming a group and a rank, would excuse a real gap."""
        watched = [p for p in self.of_group(group) if p.spawned is not None]
        return max(1, len({p.rank for p in watched if p.rank is not None}))

    def of_group(self, group: int) -> list[Process]:
        return sorted((p for p in self.processes.values() if p.group == group), key=lambda p: p.began or 0.0)

    @property
    def groups(self) -> list[int]:
        return sorted({p.group for p in self.processes.values()})


def _claimed(record: Record) -> int | None:
    value = record.get("replica_group")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def replica_groups(history: History) -> Groups:
    """Every process that spoke for a replica group, by pid; each step, heal and final assigned to its process."""
    spawned: dict[int, int] = {}
    spawn_t: dict[int, float] = {}
    spawn_rank: dict[int, int] = {}
    exits: dict[int, float] = {}
    for r in history.of("worker_spawn"):
        m = NODE.match(str(r.get("node", "")))
        if m and isinstance(r.get("worker_pid"), int):
            spawned[int(r["worker_pid"])] = int(m.group(1))
            spawn_t[int(r["worker_pid"])] = r.t
            if isinstance(r.get("rank"), int):
                spawn_rank[int(r["worker_pid"])] = int(r["rank"])
    for r in history.of("worker_exit"):
        if isinstance(r.get("worker_pid"), int):
            exits[int(r["worker_pid"])] = r.t
    processes: dict[int, Process] = {}
    contradictions: list[str] = []

    def process_of(record: Record) -> Process | None:
        pid = record.get("pid")
        if not isinstance(pid, int):
            return None
        claimed = _claimed(record)
        group = spawned.get(pid, claimed)
        if group is None:
            return None
        if claimed is not None and claimed != group:
            contradictions.append(f"pid {pid}, which the harness saw spawn in replica group {group}, reports "
                                  f"{record.ev} as replica group {claimed}")
        proc = processes.get(pid)
        if proc is None:
            rank = spawn_rank.get(pid, record.get("rank") if isinstance(record.get("rank"), int) else None)
            proc = processes[pid] = Process(pid, group, rank, spawned=spawn_t.get(pid), exited=exits.get(pid))
        return proc

    # Every worker the harness saw on a group's node is one of its processes, whether or not it ever spoke:
    # a hung or silent survivor is judged as one, not left out.
    for pid, group in spawned.items():
        processes[pid] = Process(pid, group, spawn_rank.get(pid), spawned=spawn_t.get(pid), exited=exits.get(pid))

    for r in history.of("start", "step", "heal", "final"):
        if r.get("source") in ("harness", "output"):
            continue
        proc = process_of(r)
        if proc is None:
            continue
        if r.ev == "start":
            proc.started = r.t if proc.started is None else min(proc.started, r.t)
        elif r.ev == "step" and isinstance(r.get("step"), int):
            proc.steps.append(r)
        elif r.ev == "heal":
            proc.heals.append(r)
        elif r.ev == "final":
            proc.final = r
    for proc in processes.values():
        proc.steps.sort(key=lambda r: r.t)
        proc.heals.sort(key=lambda r: r.t)
    landed: dict[int, list[tuple[int, float, str]]] = {}
    for r in history.of("instep"):
        if r.get("source") in ("harness", "output"):
            continue
        # Only a process the harness saw spawn on a group's node: a landing names no group by its own word.
        fault, pid = r.get("fault"), r.get("pid")
        if isinstance(fault, int) and not isinstance(fault, bool) and isinstance(pid, int) and pid in spawned:
            landed.setdefault(fault, []).append((pid, r.t, str(r.get("kind"))))
    return Groups(processes, contradictions, landed)


def struck_groups(fault: FaultRecord, groups: Groups) -> set[int]:
    """The replica groups a fault acted on: those of the processes it hit (its ``pids``, or for an in-step fault
    the processes that recorded it acting), or the node it named."""
    out = {groups.processes[int(p)].group for p in fault.details.get("pids") or []
           if isinstance(p, int) and int(p) in groups.processes}
    if in_step.applies(fault):
        out |= {groups.processes[pid].group for pid, t, kind in groups.landed.get(fault.index, ())
                if _landing_counts(fault, groups.processes[pid], t, kind)}
    for key in ("node", "nodes"):
        named = fault.details.get(key)
        for name in named if isinstance(named, list) else [named]:
            m = NODE.match(str(name or ""))
            if m:
                out.add(int(m.group(1)))
    return out


LANDING_STEPS = 10
"""The most steps a process may commit between a fault's injection and its landing there. An in-step fault acts at
the first step boundary after the harness armed it: a landing reported many steps later (a record of another
moment) does not say the fault struck that group when it was armed."""


def _landing_counts(fault: FaultRecord, proc: Process, t: float, kind: str) -> bool:
    """An ``instep`` record strikes its process's group only when it is this fault's kind, after the fault was
    armed, while the process lived, and within ``LANDING_STEPS`` of its steps after the arming."""
    if kind != fault.kind or fault.t_inject is None or t < fault.t_inject or not proc.alive_at(t):
        return False
    return sum(1 for r in proc.steps if fault.t_inject <= r.t <= t) <= LANDING_STEPS


def largest_gap(times: list[float], since: float, until: float) -> tuple[float, float] | None:
    """The longest stretch in [since, until] with no time in ``times``: (start, end)."""
    points = [since] + sorted(t for t in times if since < t < until) + [until]
    if until <= since:
        return None
    return max(zip(points, points[1:]), key=lambda ab: ab[1] - ab[0])
