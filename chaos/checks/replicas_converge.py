"""``replicas_converge``: the replica groups of a drop-replica job (torchft) hold the same weights at every step
they both commit, and a group that comes back heals from a live peer instead of training alone.

torchft keeps replicas identical by averaging their gradients in every committed step, and a group
that rejoins fetches the live weights from a peer (a heal) before its first step. Each committed step
of each group carries an exact checksum of its weights (chaos.integrations.torchft), so at every step
that two groups both committed, the checksums must be equal: a heal that brought the wrong weights,
or a group that trained apart, shows at the first step they share. A process that took the place of an earlier one of its group (a restart
or a return, whatever caused it) is a rejoin; it must report a heal before its first committed step, at
a time another group was training (a rejoin that trained from step 1 with its own initial weights, e.g.
after its peers had finished, is the late joiner that silently starts over). The rejoin's time comes in two parts: from the fault to
the process being up, and from then to the heal.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.evidence.replica_groups import Groups, Process, struck_groups


class ReplicasConverge(Check, kind="replicas_converge"):
    """Replica groups hold equal weight checksums at every step they both committed; a group that rejoins after a fault heals from a live peer first."""

    Config = CheckConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        groups = self.replica_groups_or_verdict(outcome)
        if isinstance(groups, CheckResult):
            return groups
        steps = [r for p in groups.processes.values() for r in p.steps]
        blank = [r for r in steps if not r.digest]
        if blank:
            return self.inconclusive(f"{len(blank)} committed step(s) carry no weight digest (first: step "
                                     f"{blank[0].step} of pid {blank[0].pid}), so the replicas cannot "
                                     f"be compared; report steps with chaos.integrations.torchft.Reporter.step")
        figures: dict[str, Any] = {}
        rejoins = self._rejoins(outcome, groups)
        figures["rejoins"] = {f"rg{p.group} (pid {p.pid})": figs for p, figs in rejoins}
        for proc, figs in rejoins:
            if figs.get("healed_step") is not None and not figs.get("peers_at_heal"):
                return self.failed(f"replica group rg{proc.group} (pid {proc.pid}) reports a heal to step "
                                   f"{figs['healed_step']} while no other group was training: there was no live peer "
                                   f"to heal from", **figures)
            if figs.get("healed_step") is None:
                first = figs.get("first_step")
                return self.failed(f"replica group rg{proc.group} rejoined (pid {proc.pid}, {figs['up_s']:.1f} s after "
                                   f"{figs['fault']}) and committed step {first} without healing from a peer: it "
                                   f"trained from its own weights, apart from the job's", **figures)
        by_step: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for proc in groups.processes.values():
            for r in proc.steps:
                by_step[int(r.step)][proc.group].add(str(r.digest))
        shared = {s: d for s, d in by_step.items() if len(d) > 1}
        figures["steps_compared"] = len(shared)
        for step in sorted(by_step):
            digests = by_step[step]
            values = {v for vs in digests.values() for v in vs}
            if len(values) > 1:
                listing = "; ".join(f"rg{g}: {', '.join(sorted(v)[:2])}" for g, v in sorted(digests.items()))
                return self.failed(f"at step {step} the replica groups' weights differ ({listing}): a heal that "
                                   f"brought other weights, or a group that trained apart", first_mismatch=step,
                                   **figures)
        if not shared:
            return self.inconclusive("no step was committed by two replica groups, so their weights were never "
                                     "compared (one group trained alone the whole run?)", **figures)
        healed = "; ".join(f"{name} up {f['up_s']:.1f} s after {f['fault']}, healed to step {f['healed_step']} "
                           f"{f['heal_s']:.2f} s later" for name, f in figures["rejoins"].items())
        return self.passed(f"equal weight checksums at all {len(shared)} step(s) two or more groups committed"
                           + (f"; {healed}" if healed else ""), **figures)

    def _rejoins(self, outcome: RunOutcome, groups: Groups) -> list[tuple[Process, dict[str, Any]]]:
        """Each process that took the place of an earlier one of its group and rank (a restart, a return: whatever
        caused it), with its heal, whether a peer was alive to heal from, and its two rejoin times (from the fault
        that struck its group last before it, else from its predecessor's end)."""
        out: list[tuple[Process, dict[str, Any]]] = []
        faults = sorted((f for f in outcome.injected_faults if f.injected and f.t_inject is not None),
                        key=lambda f: float(f.t_inject or 0.0))
        for before, proc in groups.successions():
            # "Up" is the process in its process group (its start), or where the harness saw it spawn.
            began = float(proc.started if proc.started is not None else (proc.began or 0.0))
            fault = next((f for f in reversed(faults) if float(f.t_inject or 0.0) <= began
                          and proc.group in struck_groups(f, groups)), None)
            ended = before.exited if before.exited is not None else (before.final.t if before.final is not None else None)
            t0 = float(fault.t_inject or 0.0) if fault is not None else float(ended if ended is not None else began)
            first = proc.steps[0] if proc.steps else None
            heal = next((h for h in proc.heals if first is None or h.t <= first.t), None)
            figs: dict[str, Any] = {"fault": fault.label if fault is not None else "its predecessor's end",
                                    "up_s": round(began - t0, 3),
                                    "first_step": int(first.step) if first is not None else None,
                                    "healed_step": None}
            if heal is not None:
                figs["healed_step"] = heal.step
                figs["heal_s"] = round(heal.t - began, 3)
                figs["peers_at_heal"] = sorted({p.group for p in groups.processes.values()
                                                if p.group != proc.group and p.training_at(heal.t)})
            if first is not None or heal is not None:
                out.append((proc, figs))
        return out
