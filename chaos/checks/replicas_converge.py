"""``replicas_converge``: the replica groups of a drop-replica job (torchft) hold the same weights at every step
they both commit, and a group that comes back heals from a live peer instead of training alone.

torchft keeps replicas identical by averaging their gradients in every committed step, and a group
that rejoins fetches the live weights from a peer (a heal) before its first step. Each committed step
of each group carries an exact checksum of its weights (chaos.integrations.torchft), so at every step
that two groups both committed, the checksums must be equal: a heal that brought the wrong weights,
or a group that trained apart, shows at the first step they share. A process of a group that started
after a fault struck that group is a rejoin; it must report a heal before its first committed step (a
rejoin that trained from step 1 with its own initial weights, e.g. after its peers had finished, is
the late joiner that silently starts over). The rejoin's time comes in two parts: from the fault to
the process being up, and from then to the heal.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.evidence.replica_groups import Groups, Process, replica_groups, struck_groups


class ReplicasConverge(Check, kind="replicas_converge"):
    """Replica groups hold equal weight checksums at every step they both committed; a group that rejoins after a fault heals from a live peer first."""

    Config = CheckConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        groups = replica_groups(outcome.history)
        if not groups.processes:
            return self.inconclusive("no process spoke for a replica group (a worker the harness saw on node rg<k>, "
                                     "or start/step records with replica_group): run a drop-replica job on target "
                                     "torchft, reporting through chaos.integrations.torchft")
        if groups.contradictions:
            return self.failed("; ".join(groups.contradictions[:3]))
        steps = [r for p in groups.processes.values() for r in p.steps]
        blank = [r for r in steps if not r.get("digest")]
        if blank:
            return self.inconclusive(f"{len(blank)} committed step(s) carry no weight digest (first: step "
                                     f"{blank[0].get('step')} of pid {blank[0].get('pid')}), so the replicas cannot "
                                     f"be compared; report steps with chaos.integrations.torchft.Reporter.step")
        figures: dict[str, Any] = {}
        rejoins = self._rejoins(outcome, groups)
        figures["rejoins"] = {f"rg{p.group} (pid {p.pid})": figs for p, figs in rejoins}
        for proc, figs in rejoins:
            if figs.get("healed_step") is None:
                first = figs.get("first_step")
                return self.failed(f"replica group rg{proc.group} rejoined (pid {proc.pid}, {figs['up_s']:.1f} s after "
                                   f"{figs['fault']}) and committed step {first} without healing from a peer: it "
                                   f"trained from its own weights, apart from the job's", **figures)
        by_step: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for proc in groups.processes.values():
            for r in proc.steps:
                by_step[int(r["step"])][proc.group].add(str(r["digest"]))
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
        """Each process of a struck group that started after the fault, with its heal and its two rejoin times."""
        out: list[tuple[Process, dict[str, Any]]] = []
        seen: set[int] = set()
        for fault in sorted((f for f in outcome.injected_faults if f.injected and f.t_inject is not None),
                            key=lambda f: float(f.t_inject or 0.0)):
            t0 = float(fault.t_inject or 0.0)
            for g in sorted(struck_groups(fault, groups)):
                later = [p for p in groups.of_group(g) if p.pid not in seen and p.started is not None and p.started > t0]
                if not later:
                    continue
                proc = later[0]
                seen.add(proc.pid)
                first = proc.steps[0] if proc.steps else None
                heal = next((h for h in proc.heals if first is None or h.t <= first.t), None)
                figs: dict[str, Any] = {"fault": fault.label, "up_s": round(float(proc.started or t0) - t0, 3),
                                        "first_step": int(first["step"]) if first is not None else None,
                                        "healed_step": None}
                if heal is not None:
                    figs["healed_step"] = heal.get("step")
                    figs["heal_s"] = round(heal.t - float(proc.started or t0), 3)
                if first is not None or heal is not None:
                    out.append((proc, figs))
        return out
