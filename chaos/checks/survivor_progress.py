"""``survivor_progress``: when a fault takes a replica group out of a drop-replica job (torchft), the others train on.

Drop-replica recovery promises that the job never stops the world: the replica groups a fault did not
strike keep committing steps, pausing only while the quorum notices the loss (torchft: about the
lighthouse's heartbeat timeout), and finish. For each fault that struck a replica group, each other
group's process that was alive when it struck must commit steps from then on with no stretch longer
than ``max_stall_s`` without one, until it finished (its ``final``) or a later fault struck it; a
survivor that stopped, exited or never finished is the stop-the-world this strategy exists to avoid.
Which group a process belongs to is the harness's word (it saw the process spawn on node ``rg<k>``),
and a process whose records claim another group is a contradiction, never a pass.

A survivor is judged from the fault on if it was training then. A process still coming back from an
earlier fault (the harness saw it spawn in a group that fault struck, after it struck, and it had
committed no step and no heal yet) was no member of the quorum the fault broke: the time to its first
step is its own start-up, which the box's load sets (a suite run's loaded 2-core box took 15 s to bring a
group back, 2.4 s idle), and which replicas_converge and goodput judge. It owes the same from its first
committed step on: no stall beyond the bound, and a final at the job's last step. A fault that struck
while no other group was training left no survivor to keep the job's state: INCONCLUSIVE, not a pass.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.replica_groups import Groups, largest_gap, struck_groups


class SurvivorProgressConfig(CheckConfig):
    max_stall_s: float = Field(default=10.0, gt=0)
    """The longest a surviving replica group may go without committing a step after a fault struck another (torchft: the lighthouse's heartbeat timeout plus a step)."""


class SurvivorProgress(Check, kind="survivor_progress"):
    """The replica groups a fault did not strike kept committing steps (no stall beyond max_stall_s) and finished."""

    Config = SurvivorProgressConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        groups = self.replica_groups_or_verdict(outcome)
        if isinstance(groups, CheckResult):
            return groups
        faults = [f for f in outcome.injected_faults if f.injected and f.t_inject is not None]
        struck = {f.label: struck_groups(f, groups) for f in faults}
        judged = [f for f in faults if struck[f.label]]
        if not judged:
            return self.inconclusive("no injected fault struck a replica group (none hit one of its processes or "
                                     "named a node rg<k>), so no group survived anything")
        figures: dict[str, Any] = {}
        for fault in judged:
            problem, figs = self._judge(fault, struck[fault.label], groups, judged, struck)
            figures[fault.label] = figs
            if problem is not None:
                return problem(f"{fault.label}: {figs['why']}", **figures)
        return self.passed("; ".join(f"{label}: {figs['why']}" for label, figs in figures.items()), **figures)

    def _judge(self, fault: FaultRecord, hit: set[int], groups: Groups, faults: list[FaultRecord],
               struck: dict[str, set[int]]) -> tuple[Any, dict[str, Any]]:
        t0 = float(fault.t_inject or 0.0)
        bound = self.config.max_stall_s
        alive = {g: [p for p in groups.of_group(g) if p.alive_at(t0)] for g in groups.groups if g not in hit}
        figs: dict[str, Any] = {"struck_groups": sorted(hit), "survivors": {}}
        if not any(alive.values()):
            figs["why"] = (f"it struck replica group(s) {_names(hit)}, and no other group had a process running then: "
                           f"there was no survivor to keep training")
            return self.inconclusive, figs
        training = False
        for g, procs in sorted(alive.items()):
            for proc in procs:
                rejoining = _rejoining(proc, t0, faults, struck)
                training = training or not rejoining
                # A later fault that takes this very process down ends what it owes this one (one that merely names
                # its node, a slow link, does not: the survivor still has to train on and finish).
                later = [float(f.t_inject or 0.0) for f in faults if float(f.t_inject or 0.0) > t0
                         and proc.pid in {p for p in f.details.get("pids") or [] if isinstance(p, int)}]
                end = min(later) if later else (proc.final.t if proc.final is not None else None)
                name = f"rg{g} (pid {proc.pid})"
                if end is None:
                    gone = (f"exited {proc.exited - t0:.1f} s after it" if proc.exited is not None
                            else "wrote no final event")
                    figs["survivors"][name] = {"finished": False}
                    figs["why"] = (f"it struck {_names(hit)}; survivor {name} {gone} and never finished: a survivor "
                                   f"that stops is the stop-the-world drop-replica recovery exists to avoid")
                    return self.failed, figs
                top = max((int(r.step) for p in groups.processes.values() for r in p.steps), default=0)
                own = max((int(r.step) for r in proc.steps), default=0)
                # A final's step by name: ``Final.step`` insists on it, and a final without one is a mismatch here.
                if not later and proc.final is not None and (own < top or proc.final.get("step") != own):
                    figs["survivors"][name] = {"finished": False}
                    figs["why"] = (f"it struck {_names(hit)}; survivor {name} wrote its final at step "
                                   f"{proc.final.get('step')} with its last committed step at {own}, and the job "
                                   f"reached step {top}: a final is no proof of steps it never committed")
                    return self.failed, figs
                after = [r for r in proc.steps if t0 < r.t <= end]
                # A process still coming back from an earlier fault is measured from its first committed step: the
                # wait before it is its start-up (the box's load), not a pause of the quorum this fault broke.
                since = after[0].t if rejoining and after else t0
                gap = largest_gap([r.t for r in proc.steps], since, end)
                stall = 0.0 if gap is None else gap[1] - gap[0]
                figs["survivors"][name] = {"stall_s": round(stall, 3), "steps_after": len(after),
                                           "first_step_after": int(after[0].step) if after else None,
                                           "finished": later == []}
                if rejoining:
                    figs["survivors"][name]["rejoining"] = True
                    figs["survivors"][name]["first_step_s"] = round(after[0].t - t0, 3) if after else None
                if stall > bound:
                    figs["why"] = (f"it struck {_names(hit)}; survivor {name} went {stall:.2f} s without committing a "
                                   f"step ({gap[0] - t0:.2f}-{gap[1] - t0:.2f} s after it), beyond the bound of "
                                   f"{bound:g} s")
                    return self.failed, figs
        if not training:
            figs["why"] = (f"it struck {_names(hit)} while every other group's process was still coming back from an "
                           f"earlier fault (none had committed a step since it was spawned): no survivor was training to "
                           f"keep the job's state, so none could show that the job trains on")
            return self.inconclusive, figs
        worst = max(v["stall_s"] for v in figs["survivors"].values())
        steps = sum(v["steps_after"] for v in figs["survivors"].values())
        figs["max_stall_s"] = worst
        figs["why"] = (f"it struck {_names(hit)}; {len(figs['survivors'])} survivor process(es) committed {steps} "
                       f"step(s) after it and finished, the longest stall {worst:.2f} s (bound {bound:g} s)")
        return None, figs


def _rejoining(proc: Any, t0: float, faults: list[FaultRecord], struck: dict[str, set[int]]) -> bool:
    """The process was coming back from an earlier fault when one at ``t0`` struck: the harness saw it spawn (or it
    started) after an earlier fault struck its group, and it had committed no step and reported no heal by ``t0``.
    A process of the job's first launch is never excused: its start-up ended before training, and so before any fault."""
    began = proc.began
    if began is None or any(r.t <= t0 for r in proc.steps) or any(r.t <= t0 for r in proc.heals):
        return False
    return any(float(f.t_inject or 0.0) < t0 and proc.group in struck[f.label] and began >= float(f.t_inject or 0.0)
               for f in faults)


def _names(groups: set[int]) -> str:
    return ", ".join(f"rg{g}" for g in sorted(groups))
