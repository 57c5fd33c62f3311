"""``health_action``: every injected XID was seen by the monitor of the rank that owns the device, and the action its policy requires happened."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome
from chaos.evidence.harness_records import Launch, SlurmDrain, WorkerExit, XidWrite
from chaos.evidence.records import Health
from chaos.health.exclusions import exclusions_path, read_exclusions
from chaos.health.policy import Action, Policy


class HealthActionConfig(CheckConfig):
    within_s: float = Field(default=10.0, gt=0)
    """The health event, and the action it requires (exit, exclusion record, checkpoint start), within this many seconds of each XID."""
    degrading_count: int = Field(default=3, ge=1)
    """The workload monitor's policy: 63/92 reports on one device before it is called degrading (checkpoint now)."""


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _launch_of(attempt: Any) -> int | None:
    try:
        return int(str(attempt).split(".")[0])
    except ValueError:
        return None


class HealthAction(Check, kind="health_action"):
    """Every injected XID was seen by the monitor of the rank that owns the device, and the action its policy requires happened."""

    Config = HealthActionConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        xids = [f for f in outcome.injected_faults if f.kind == "xid"]
        if not xids:
            return self.inconclusive("no xid fault was injected, so no health action can be judged (did the trigger fire?)")
        failed, figures = self.judge_each(xids, lambda fault: self._judge(fault, outcome))
        if failed:
            return failed
        summary = "; ".join(f"{k}: {v['actions']} by rank {v['rank']} in {v['detect_s']} s" for k, v in figures.items())
        return self.passed(summary, **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[str | None, dict[str, Any]]:
        c, h, d = self.config, outcome.history, fault.details
        code, device, rank = d.get("code"), d.get("device"), d.get("rank")
        # This fire's writes: from its injection to the next fire of the same fault (a repeating trigger).
        later = [f.t_inject for f in outcome.injected_faults if f.index == fault.index and f.t_inject is not None
                 and f.t_inject > fault.t_inject]
        until = min(later) - 1 if later else float("inf")
        writes = [r for r in h.harness(XidWrite) if r.index == fault.index and fault.t_inject - 1 <= r.t < until]
        # The monitor's policy counts every report on the device in its window, this fire's and earlier
        # ones' alike: replay all of them, in order, and read the decision at each of this fire's writes.
        same = {f.index for f in outcome.injected_faults if f.kind == "xid"
                and (f.details.get("code"), f.details.get("device")) == (code, device)}
        mine = {id(w) for w in writes}
        last = max((w.t for w in writes), default=float("-inf"))
        policy = Policy(degrading_count=c.degrading_count)
        expected = []
        for w in sorted((r for r in h.harness(XidWrite) if r.index in same and r.t <= last), key=lambda r: r.t):
            policy.clock = lambda t=w.t: t
            action = policy.decide(code, device).action
            if id(w) in mine:
                expected.append(action)
        events = [r for r in h.of("health") if r.code == code and r.device == device
                  and r.t >= fault.t_inject]
        figs: dict[str, Any] = {"code": code, "device": device, "rank": rank, "writes": len(writes),
                                "expected": [a.value for a in expected],
                                "actions": [e.action for e in events], "detect_s": None}
        if rank is None:
            return (f"no rank owned device {device} when the XID was written; give a device the job uses", figs)
        if not events:
            return (f"no health event for XID {code} on device {device} after the injection (is the monitor running? "
                    f"CHAOS_XID_SOURCE in the workload's environment)", figs)
        first = events[0]
        figs["detect_s"] = round(first.t - fault.t_inject, 3)
        if figs["detect_s"] > c.within_s:
            return (f"the first health event came {figs['detect_s']} s after the XID (bound {c.within_s:g} s)", figs)
        wrong = [e for e in events if e.rank != rank]
        if wrong:
            return (f"rank {wrong[0].rank} acted on device {device}, which rank {rank} owns", figs)
        strongest = expected[-1] if expected else Action(d.get("action"))
        acted = [e for e in events if e.action == strongest.value]
        if not acted:
            return (f"the policy requires '{strongest.value}' for XID {code} (after {len(writes)} report(s)); the monitor "
                    f"did {figs['actions']}", figs)
        event = acted[0]
        check = {Action.RESTART: self._restarted, Action.EXCLUDE: self._excluded,
                 Action.CHECKPOINT: self._checkpointed}.get(strongest)
        problem = check(event, outcome, figs) if check else None
        return problem, figs

    def _restarted(self, event: Health, outcome: RunOutcome, figs: dict[str, Any]) -> str | None:
        h, t = outcome.history, event.t
        exits = [r for r in h.harness(WorkerExit) if r.rank == event.rank
                 and str(r.attempt) == str(event.attempt) and t <= r.t <= t + self.config.within_s]
        if not exits:
            return f"rank {event.rank} did not exit within {self.config.within_s:g} s of its restart decision"
        later = [r for r in h.of("start") if r.t > t and str(r.attempt) != str(event.attempt)]
        if not later:
            return "the rank exited but the job never restarted (no start of a later attempt)"
        figs["restarted_as"] = str(later[0].attempt)
        return None

    def _excluded(self, event: Health, outcome: RunOutcome, figs: dict[str, Any]) -> str | None:
        h, device, host = outcome.history, event.device, event.host
        record = [e for e in read_exclusions(exclusions_path(outcome.run_dir)) if e.get("device") == device
                  and e.get("host") in (None, host)]
        if not record:
            return f"device {device} of {host} is not in {exclusions_path(outcome.run_dir).name}"
        drains = [r for r in h.harness(SlurmDrain) if r.node == host and r.t >= event.t]
        if drains:
            return self._drained(drains[0], outcome, figs)
        # A relaunch by the health monitor says which devices it kept; the launch at the job's start does not.
        relaunches = [r for r in h.harness(Launch) if r.t > event.t and r.visible_devices is not None]
        if not relaunches:
            return "the device was recorded as bad but the job was never relaunched without it"
        launch = relaunches[0]
        if device in launch.visible_devices:
            return f"launch {launch.launch} still used device {device}"
        starts = [r for r in h.of("start") if _launch_of(r.attempt) == launch.launch]
        sizes = sorted({r.world_size for r in starts})
        figs.update(relaunch=launch.launch, world_size_after=sizes, visible_after=launch.visible_devices)
        if sizes != [launch.nproc_per_node]:
            return f"launch {launch.launch} ran with world size {sizes}, expected {launch.nproc_per_node}"
        final = h.final_attempt()
        if outcome.exit_code != 0 or final is None or _launch_of(final) != launch.launch:
            return f"the job did not complete in the relaunch without device {device} (exit {outcome.exit_code}, final attempt {final})"
        return None

    def _drained(self, drain: SlurmDrain, outcome: RunOutcome, figs: dict[str, Any]) -> str | None:
        """On a scheduler (Slurm): the node was drained, and the job ran again, and finished, without it."""
        h, node = outcome.history, drain.node
        later = [r for r in h.of("start") if r.t > drain.t]
        hosts = sorted({str(r.host) for r in later})
        figs.update(drained=node, drain_reason=drain.reason, hosts_after=hosts)
        if not later:
            return f"{node} was drained but the job never started again"
        if node in hosts:
            attempt = next(r.attempt for r in later if r.host == node)
            return f"attempt {attempt} ran on {node} after it was drained"
        final = h.final_attempt()
        if outcome.exit_code != 0 or final is None or final not in {str(r.attempt) for r in later}:
            return f"the job did not complete after {node} was drained (exit {outcome.exit_code}, final attempt {final})"
        return None

    def _checkpointed(self, event: Health, outcome: RunOutcome, figs: dict[str, Any]) -> str | None:
        h, t = outcome.history, event.t
        begins = [r for r in h.of("ckpt_begin") if t <= r.t <= t + self.config.within_s]
        commits = {r.step for r in h.of("ckpt_commit") if r.t >= t}
        every = _int(outcome.experiment.workload.args.get("ckpt_every"))
        # The periodic save would have happened without the alert: only one that says it was for the
        # alert (reason "health"), or that falls off the periodic schedule, answers it.
        asked = [b for b in begins if b.reason == "health"
                 or (b.reason is None and every and int(b.step or 0) % every != 0)]
        done = [b for b in asked if b.step in commits]
        if not done:
            periodic = [b.step for b in begins if b not in asked]
            also = (f" (the periodic save(s) of step {periodic} do not count: they were due anyway)"
                    if periodic else "")
            return (f"no checkpoint was started for the degrading alert and committed within "
                    f"{self.config.within_s:g} s{also}")
        figs["checkpoint_step"] = done[0].step
        figs["checkpoint_after_s"] = round(done[0].t - t, 3)
        return None
