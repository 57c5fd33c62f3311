"""``drop_replica_samples``: in a drop-replica job (torchft), the samples a dead group did not train are lost by
design, and nothing else is: no index twice, no gap a dead group does not explain, and the loss bounded.

Checkpoint-restart's ``exactly_once`` would call a drop-replica job's lost samples gaps: there, every
sample must be trained. Drop-replica recovery promises something else: while a group is down, its
share of each step is not trained (torchft: "discarding lost samples"), nor is the batch of a group in the
step it healed in (it commits its peers' average: ``participating`` false), the others' shares are, once.
So over the steps 1..the last one the job reached, each step was committed by some group (the step
counter never skipped one), each (group, step) missing because the group was out of the quorum that
committed the step (its ``participants`` say so) loses that group's batch (one per rank of the group),
every index is trained at most once per epoch, and in every completed epoch the indices never trained
are no more than the batches of the missing (group, step)s of that epoch. The lost share of all
group-steps must stay within ``max_lost_fraction``. Steps torchft discarded (``discard``: a peer died
inside the all-reduce) are counted as figures; the group trains that step again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome

EXAMPLES = 3


class DropReplicaSamplesConfig(CheckConfig):
    max_lost_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    """The largest share of (replica group, step) pairs whose batch may go untrained because their group was down."""


class DropReplicaSamples(Check, kind="drop_replica_samples"):
    """Only the batches of (group, step)s whose group was down are untrained, within max_lost_fraction; no index twice per epoch, no unexplained gap."""

    Config = DropReplicaSamplesConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        h = outcome.history
        groups = self.replica_groups_or_verdict(outcome)
        if isinstance(groups, CheckResult):
            return groups
        size = h.dataset_size()
        if size is None:
            return self.inconclusive("the start events carry no dataset_size, so there is no index set to account for")
        steps = [(p.group, r) for p in groups.processes.values() for r in p.steps]
        if not steps:
            return self.failed("no replica group committed a step")
        if any(not isinstance(r.samples, list) for _g, r in steps):
            return self.inconclusive("committed steps carry no 'samples' list, so what each group trained cannot be "
                                     "accounted; report them with chaos.integrations.torchft.Reporter.step")
        declared = [int(r.num_replica_groups) for r in h.of("start")
                    if isinstance(r.num_replica_groups, int) and r.pid in groups.processes]
        n_groups = max(declared + [len(groups.groups)])
        last = max(int(r.step) for _g, r in steps)
        procs_of = {id(r): p for p in groups.processes.values() for r in p.steps}
        by_step: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        trained: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        twice: list[str] = []
        seen: set[tuple[int, Any, int]] = set()
        idle: set[tuple[int, int]] = set()
        idle_lost: dict[tuple[int, int], list[Any]] = defaultdict(list)
        figures: dict[str, Any] = {"replica_groups": n_groups, "last_step": last,
                                   "discarded_steps": len(h.of("discard"))}
        for g, r in sorted(steps, key=lambda gr: gr[1].t):
            s, proc = int(r.step), procs_of[id(r)]
            if (g, proc.rank, s) in seen:
                twice.append(f"rg{g} step {s}")
                continue
            seen.add((g, proc.rank, s))
            by_step[s][g].append(r)
            # Any word of skipping, even false (Step.skipped reads only true): a live group drops nothing.
            if r.get("skipped") is not None:
                return self.failed(f"rg{g} (pid {proc.pid}) reports step {s} skipped: a drop-replica job drops a down "
                                   f"group's share, not a live group's update", **figures)
            bad = [i for i in r.samples if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < size]
            if bad:
                return self.failed(f"rg{g} step {s} lists index(es) {bad[:EXAMPLES]} outside the dataset's 0.."
                                   f"{size - 1}", **figures)
            if r.participating is not None and r.participating is not True:
                healed = proc.steps[0] is r and any(hl.t <= r.t for hl in proc.heals)
                if r.participating is not False or not healed:
                    return self.failed(f"rg{g} (pid {proc.pid}) says it did not take part in step {s} "
                                       f"(participating: {r.participating!r}), which only the first step of "
                                       f"a group that healed may say", **figures)
                idle.add((g, s))
                idle_lost[(g, s)].append(r)
                continue  # committed with its peers' gradients (a heal): its own batch was not trained
            for index in r.samples:
                trained[int(r.epoch)][int(index)].append(f"rg{g}:{s}")
        skipped = [s for s in range(1, last + 1) if not by_step.get(s)]
        if skipped:
            return self.failed(f"step(s) {_listed(skipped)} committed by no replica group: the job's step counter "
                               f"skipped them", **figures)
        if twice:
            return self.failed(f"a replica group committed a step twice ({', '.join(twice[:EXAMPLES])})", **figures)
        dup = [(e, i, where) for e, by_index in sorted(trained.items()) for i, where in sorted(by_index.items())
               if len(where) > 1]
        if dup:
            shown = "; ".join(f"index {i} epoch {e} at {', '.join(w)}" for e, i, w in dup[:EXAMPLES])
            return self.failed(f"{len(dup)} index(es) trained twice in one epoch ({shown}): more than a dropped "
                               f"replica's loss", duplicated=len(dup), **figures)
        lost_pairs = 0
        lost_by_epoch: dict[int, int] = defaultdict(int)
        everyone = sorted(set(range(n_groups)) | set(groups.groups))
        for s in range(1, last + 1):
            present = by_step[s]
            when = min(r.t for rs in present.values() for r in rs)
            sample = next(r for rs in present.values() for r in rs)
            parts = [r.participants for rs in present.values() for r in rs
                     if isinstance(r.participants, int) and not isinstance(r.participants, bool)]
            quorum = max(parts) if parts else None
            for g in everyone:
                if g in present and (g, s) not in idle:
                    continue
                # Lost by design only when the group was out of the quorum that committed the step (down, hung or
                # still joining): the quorum's own size says so; without it, no process of the group was training.
                if g not in present and quorum is not None and quorum > len(present):
                    return self.failed(f"step {s} was committed by a quorum of {quorum} groups, but only "
                                       f"{len(present)} reported it: rg{g}'s share is missing, not dropped", **figures)
                if g not in present and quorum is None:
                    live = [p for p in groups.of_group(g) if p.training_at(when)]
                    if live:
                        return self.failed(f"rg{g} was training (pid {live[0].pid}) when step {s} was committed, but "
                                           f"committed no step {s}: a live group's share went untrained", **figures)
                lost_pairs += 1
                if g in present:
                    # A group that healed in the step: the batches of its processes that sat it out, each named.
                    for r in idle_lost[(g, s)]:
                        lost_by_epoch[int(r.epoch)] += len(r.samples)
                else:
                    # A down group leaves a batch of each of its ranks untrained, not one: as many as the group's
                    # ranks, each the size of a process's batch in the step (never more, or a real gap would hide).
                    lost_by_epoch[int(sample.epoch)] += groups.size(g) * len(sample.samples)
        epochs = sorted(trained)
        unexplained = []
        for e in epochs[:-1]:  # the last epoch may be unfinished: its untrained indices are not yet due
            gap = size - len(trained[e])
            if gap > lost_by_epoch.get(e, 0):
                unexplained.append(f"epoch {e}: {gap} never trained, {lost_by_epoch.get(e, 0)} lost with a down group")
        fraction = lost_pairs / (n_groups * last)
        figures.update(lost_group_steps=lost_pairs, group_steps=n_groups * last, lost_fraction=round(fraction, 4),
                       lost_samples=sum(lost_by_epoch.values()), completed_epochs=len(epochs) - 1)
        if unexplained:
            return self.failed(f"gaps no down replica group explains ({'; '.join(unexplained[:EXAMPLES])})", **figures)
        bound = self.config.max_lost_fraction
        if fraction > bound:
            return self.failed(f"{lost_pairs} of {n_groups * last} (group, step)s went untrained ({fraction:.1%}), "
                               f"beyond the bound of {bound:.1%}", **figures)
        if len(epochs) < 2:
            return self.inconclusive(f"no epoch completed (the run trained only epoch {epochs[0]}), so its gaps "
                                     f"cannot be told from what was not due yet; run more steps", **figures)
        discarded = (f"; {figures['discarded_steps']} step(s) discarded (a peer lost inside the all-reduce) and "
                     f"trained again" if figures["discarded_steps"] else "")
        return self.passed(f"{lost_pairs} of {n_groups * last} (group, step)s lost with a down group ({fraction:.1%}, "
                           f"bound {bound:.1%}, {figures['lost_samples']} samples); no index twice in an epoch, and "
                           f"every gap of the {len(epochs) - 1} completed epoch(s) is a down group's share{discarded}",
                           **figures)


def _listed(items: list[int]) -> str:
    return ", ".join(str(i) for i in items[:5]) + (f", ... ({len(items)} in all)" if len(items) > 5 else "")
