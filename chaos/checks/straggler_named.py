"""``straggler_named``: the stack noticed each straggler and each degraded link: a health event named the slowed
rank (or a rank sending over the degraded node's link) within a bound, and, by policy, ejected a slow rank."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.harness_records import Launch
from chaos.evidence.records import Health
from chaos.health.exclusions import exclusions_path, read_exclusions


SOURCES = {"straggler": "straggler", "link": "network-degrade"}
"""Health event source -> the fault kind that slows what it names."""


class StragglerNamedConfig(CheckConfig):
    within_s: float = Field(default=15.0, gt=0)
    """A health event naming the slowed rank (source 'straggler'), or a rank on the degraded node (source 'link',
    for a network-degrade fault), within this many seconds of the slowdown."""
    eject: bool = False
    """Also require the ejection of a slowed rank: its device recorded as excluded and a relaunch with fewer ranks
    (a slow link is judged on being named: leaving a node out is the scheduler's call)."""


class StragglerNamed(Check, kind="straggler_named"):
    """The stack noticed each straggler and each degraded link: a health event named the slowed rank (or a rank
    sending over the degraded node's link) within a bound, and, by policy, ejected a slow rank."""

    Config = StragglerNamedConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        slowed = [f for f in outcome.injected_faults if f.kind in ("straggler", "network-degrade")]
        if not slowed:
            return self.inconclusive("no straggler or network-degrade fault was injected, so there was no slow rank "
                                     "or link to name (did the trigger fire?)")
        false_alarm = self._false_alarm(slowed, outcome)
        if false_alarm:
            return self.failed(false_alarm)
        failed, figures = self.judge_each(
            slowed, lambda fault: (self._judge if fault.kind == "straggler" else self._judge_link)(fault, outcome))
        if failed:
            return failed
        return self.passed("; ".join(self._said(v) for v in figures.values()), **figures)

    def _false_alarm(self, slowed: list[FaultRecord], outcome: RunOutcome) -> str | None:
        """A name given while nothing of its kind was slowed. Without this, a detector that names a rank every
        few steps whatever happens would pass whenever that rank happens to be the one slowed."""
        windows = {source: [self._window(f) for f in slowed if f.kind == kind] for source, kind in SOURCES.items()}
        # A ``step`` on a health event is the monitor's to add or not (the protocol gives it none), and the host and
        # attempt are shown as written, '?' where absent: read by name, for the message alone.
        for r in outcome.history.of("health"):
            source = r.source
            if source in windows and not any(t0 <= r.t <= end for t0, end in windows[source]):
                what = "rank" if source == "straggler" else "link of rank"
                when = f"step {r['step']}" if "step" in r else f"attempt {r.get('attempt', '?')}"
                return (f"{what} {r.slow_rank} on {r.get('host', '?')} was named slow at {when} "
                        f"({r.ratio}x) while no {SOURCES[source]} fault was acting: "
                        f"a false alarm (detector too sensitive for this machine? raise the factor or the window)")
        return None

    def _window(self, fault: FaultRecord) -> tuple[float, float]:
        """When a name answers ``fault``: from its injection to its release (or revert) plus the bound."""
        return (fault.t_inject or 0.0), (fault.t_release or fault.t_revert or float("inf")) + self.config.within_s

    def _named(self, fault: FaultRecord, source: str, outcome: RunOutcome) -> list[Health]:
        """The health events of ``source`` inside ``fault``'s window."""
        t0, end = self._window(fault)
        return [r for r in outcome.history.of("health") if r.source == source and t0 <= r.t <= end]

    @staticmethod
    def _said(v: dict[str, Any]) -> str:
        if "nodes" in v:
            return (f"{'/'.join(v['nodes'])}'s link named (rank {v['rank']}) in {v['detect_s']} s "
                    f"({v['ratio']}x its peers' probe time)")
        return (f"rank {v['rank']} named in {v['detect_s']} s ({v['ratio']}x its peers' own time)"
                f"{', ejected' if v.get('ejected') else ''}")

    def _judge_link(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        """A network-degrade fault slows the degraded nodes' outgoing traffic: a rank on one of them must be named."""
        nodes = [str(n) for n in fault.details.get("nodes") or []]
        t0 = fault.t_inject or 0.0
        named = self._named(fault, "link", outcome)
        figs: dict[str, Any] = {"nodes": nodes, "rank": None, "detect_s": None, "ratio": None,
                                "named": [f"rank {r.slow_rank} on {r.host}" for r in named]}
        if not nodes:
            return "the fault recorded no node whose link it degraded", figs
        if not named:
            return (f"no link health event while {', '.join(nodes)}'s link was degraded: is the workload's link probe "
                    f"on (workloads/ddp.py --link-probe-every 5; chaos.health.link for your own loop)?", figs)
        others = [(self._window(f), [str(n) for n in f.details.get("nodes") or []]) for f in outcome.injected_faults
                  if f.kind == "network-degrade" and f is not fault]
        wrong = [r for r in named if r.host not in nodes
                 and not any(w0 <= r.t <= w1 and r.host in ns for (w0, w1), ns in others)]
        if wrong:
            return (f"the link of rank {wrong[0].slow_rank} on {wrong[0].host} was named, but "
                    f"{', '.join(nodes)}'s was the one degraded", figs)
        named = [r for r in named if r.host in nodes]
        if not named:
            return (f"no link health event named {', '.join(nodes)}'s link while it was degraded (only the links "
                    f"other network-degrade faults degraded)"), figs
        first = named[0]
        figs.update(rank=first.slow_rank, detect_s=round(first.t - t0, 3), ratio=first.ratio)
        if figs["detect_s"] > self.config.within_s:
            return f"named {figs['detect_s']} s after the degradation began (bound {self.config.within_s:g} s)", figs
        return None, figs

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        c = self.config
        ranks = fault.details.get("ranks") or []
        rank = ranks[0] if ranks else None
        t0 = fault.t_inject or 0.0
        named = self._named(fault, "straggler", outcome)
        figs: dict[str, Any] = {"rank": rank, "detect_s": None, "ratio": None, "named": [r.slow_rank for r in named]}
        if rank is None:
            return "the fault recorded no rank it slowed", figs
        if not named:
            return (f"no straggler health event while rank {rank} was slowed: is the workload's straggler detection "
                    f"on (workloads/ddp.py --straggler-factor 1.5; chaos.health.straggler for your own loop)?", figs)
        # A name of another rank is wrong unless another straggler fault was slowing that rank then
        # (two overlapping stragglers: each naming answers its own fault).
        others = [(self._window(f), f.details.get("ranks") or []) for f in outcome.injected_faults
                  if f.kind == "straggler" and f is not fault]
        wrong = [r for r in named if r.slow_rank != rank
                 and not any(w0 <= r.t <= w1 and r.slow_rank in rs for (w0, w1), rs in others)]
        if wrong:
            return f"rank {wrong[0].slow_rank} was named, but rank {rank} was the one slowed", figs
        mine = [r for r in named if r.slow_rank == rank]
        if not mine:
            return (f"no straggler health event named rank {rank} while it was slowed (only the ranks other "
                    f"straggler faults slowed: {sorted({str(r.slow_rank) for r in named})})"), figs
        first = mine[0]
        figs.update(detect_s=round(first.t - t0, 3), ratio=first.ratio)
        if figs["detect_s"] > c.within_s:
            return f"named {figs['detect_s']} s after the slowdown began (bound {c.within_s:g} s)", figs
        if c.eject:
            device = first.device
            excluded = [e for e in read_exclusions(exclusions_path(outcome.run_dir))
                        if e.get("code") == "straggler" and e.get("device") == device]
            relaunch = [r for r in outcome.history.harness(Launch) if r.t > first.t and device in (r.excluded or [])]
            if not excluded:
                return f"rank {rank} was named but its device {device} was never recorded as excluded", figs
            if not relaunch:
                return f"device {device} was excluded but the job was never relaunched without it", figs
            figs.update(ejected=True, relaunch_s=round(relaunch[0].t - first.t, 3),
                        nproc_per_node=relaunch[0].nproc_per_node)
        return None, figs
