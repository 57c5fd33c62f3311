"""``straggler_named``: the stack noticed each straggler: a health event named the slowed rank within a bound (and, by policy, ejected it)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.health.exclusions import exclusions_path, read_exclusions


class StragglerNamedConfig(CheckConfig):
    within_s: float = Field(default=15.0, gt=0)
    """A health event from source 'straggler' naming the slowed rank within this many seconds of the slowdown."""
    eject: bool = False
    """Also require the ejection: the rank's device recorded as excluded and a relaunch with fewer ranks."""


class StragglerNamed(Check, kind="straggler_named"):
    """The stack noticed each straggler: a health event named the slowed rank within a bound (and, by policy, ejected it)."""

    Config = StragglerNamedConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        slowed = [f for f in outcome.injected_faults if f.kind == "straggler"]
        if not slowed:
            return self.inconclusive("no straggler fault was injected, so there was no slow rank to name "
                                     "(did the trigger fire?)")
        figures: dict[str, Any] = {}
        for fault in slowed:
            problem, figs = self._judge(fault, outcome)
            figures[fault.label] = figs
            if problem:
                return self.failed(f"{fault.label}: {problem}", **figures)
        return self.passed("; ".join(f"{k}: rank {v['rank']} named in {v['detect_s']} s ({v['ratio']}x its peers' "
                                     f"own time){', ejected' if v.get('ejected') else ''}"
                                     for k, v in figures.items()), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        c = self.config
        ranks = fault.details.get("ranks") or []
        rank = ranks[0] if ranks else None
        t0 = fault.t_inject or 0.0
        end = (fault.t_release or fault.t_revert or float("inf")) + c.within_s
        named = [r for r in outcome.history.of("health") if r.get("source") == "straggler" and t0 <= r.get("t", 0) <= end]
        figs: dict[str, Any] = {"rank": rank, "detect_s": None, "ratio": None, "named": [r.get("slow_rank") for r in named]}
        if rank is None:
            return "the fault recorded no rank it slowed", figs
        if not named:
            return (f"no straggler health event while rank {rank} was slowed: is the workload's straggler detection "
                    f"on (workloads/ddp.py --straggler-factor 1.5; chaos.health.straggler for your own loop)?", figs)
        wrong = [r for r in named if r.get("slow_rank") != rank]
        if wrong:
            return f"rank {wrong[0].get('slow_rank')} was named, but rank {rank} was the one slowed", figs
        first = named[0]
        figs.update(detect_s=round(first["t"] - t0, 3), ratio=first.get("ratio"))
        if figs["detect_s"] > c.within_s:
            return f"named {figs['detect_s']} s after the slowdown began (bound {c.within_s:g} s)", figs
        if c.eject:
            device = first.get("device")
            excluded = [e for e in read_exclusions(exclusions_path(outcome.run_dir))
                        if e.get("code") == "straggler" and e.get("device") == device]
            relaunch = [r for r in outcome.history.of("launch") if r.get("t", 0) > first["t"] and device in
                        (r.get("excluded") or [])]
            if not excluded:
                return f"rank {rank} was named but its device {device} was never recorded as excluded", figs
            if not relaunch:
                return f"device {device} was excluded but the job was never relaunched without it", figs
            figs.update(ejected=True, relaunch_s=round(relaunch[0]["t"] - first["t"], 3),
                        nproc_per_node=relaunch[0].get("nproc_per_node"))
        return None, figs
