"""``restarted_in_process``: after a fault, every rank restarted inside its own process and trained again, fast.

In-process restart (NVIDIA Resiliency Extension's ``inprocess.Wrapper``) promises recovery without the cost of new
processes: the ranks' process group is torn down and the training function called again in the same processes,
which resume from the last checkpoint. The evidence is the workload's ``inprocess_restart`` event (the wrapper's
iteration, chaos.integrations.nvrx.InProcess) and the harness's own view of the processes. For each injected fault,
every rank of the attempt it struck must:

- report an in-process restart after the fault, from the very process that ran that rank before it (the pid the
  harness saw spawn, and that wrote the rank's records before the fault), at a wrapper iteration above 0;
- train a step again after it, from that process, within ``max_s`` of the fault (the restart's latency);

and no worker process may have been spawned after the fault: a new process is the escalation (the wrapper gave up,
or a process died and torchrun restarted the group), which ``completes`` may still call a recovery but this check
does not call in-process. Records claiming a rank's restart from a process the harness never saw are a
contradiction, not a pass.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, FaultRecord, RunOutcome


class RestartedInProcessConfig(CheckConfig):
    max_s: float = Field(default=60.0, gt=0, le=24 * 3600)
    """Bound on the restart's latency: from the fault to the step every rank trained again in its own process (on
    gloo: the healthy ranks' collective timeout, which NVRx cannot abort, plus the wrapper's barriers)."""


class RestartedInProcess(Check, kind="restarted_in_process"):
    """Every rank of the struck attempt restarted in its own process (no new worker process) and trained again within max_s."""

    Config = RestartedInProcessConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        faults = [f for f in outcome.injected_faults if f.injected and f.t_inject is not None]
        if not faults:
            return self.inconclusive("no fault was injected, so nothing had to restart in process")
        figures: dict[str, Any] = {}
        for fault in faults:
            problem, figs = self._judge(fault, outcome)
            figures[fault.label] = figs
            if problem is not None:
                return problem(f"{fault.label}: {figs['why']}", **figures)
        return self.passed("; ".join(f"{label}: {figs['why']}" for label, figs in figures.items()), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome) -> tuple[Any, dict[str, Any]]:
        h = outcome.history
        t0 = float(fault.t_inject or 0.0)
        figs: dict[str, Any] = {}
        spawns = [r for r in h.of("worker_spawn") if isinstance(r.get("worker_pid"), int)]
        later = sorted({r["worker_pid"] for r in spawns if r.t > t0})
        if later:
            first = min(r.t for r in spawns if r.t > t0)
            figs["why"] = (f"new worker process(es) {later} were spawned {first - t0:.1f} s after it: the job escalated to "
                           f"a process restart, not an in-process one")
            return self.failed, figs
        seen = {r["worker_pid"]: r for r in spawns if r.t <= t0}
        attempt = fault.details.get("attempt")
        if not isinstance(attempt, str):
            # A fault inside the step (chaos.instep) acts in whatever attempt runs when it lands: the one its ranks
            # were reporting from when it was injected.
            attempt = _attempt_at(h, t0, fault.details.get("ranks"))
        if attempt is None:
            figs["why"] = ("neither its record nor the ranks' records before it say which attempt it struck, so there "
                           "are no ranks to hold to it")
            return self.inconclusive, figs
        ranks = sorted(r for r in h.attempt_ranks().get(attempt, set()) if isinstance(r, int))
        if not ranks:
            figs["why"] = f"attempt {attempt}, which it struck, reported no rank"
            return self.inconclusive, figs
        records = [r for r in h.records if r.source != "harness" and str(r.get("attempt")) == attempt]
        latency: dict[int, float] = {}
        iterations: dict[int, int] = {}
        for rank in ranks:
            own = [r for r in records if r.get("rank") == rank]
            before = {r.get("pid") for r in own if r.t <= t0}
            spawned = {pid for pid, r in seen.items() if r.get("rank") == rank}
            # The rank's process: the one the harness saw spawn as this rank, and that wrote its records up to the fault.
            process = before & spawned
            if len(process) != 1:
                figs["why"] = (f"rank {rank}'s process before it is not one the harness saw spawn and heard from "
                               f"(records from pid(s) {sorted(p for p in before if p is not None)}, spawned "
                               f"{sorted(spawned)}): nothing to hold its restart to")
                return self.inconclusive if not before or not spawned else self.failed, figs
            pid = next(iter(process))
            restarts = [r for r in own if r.ev == "inprocess_restart" and r.t > t0]
            if not restarts:
                figs["why"] = f"rank {rank} (pid {pid}) reported no in-process restart after it"
                return self.failed, figs
            first = restarts[0]
            if first.get("pid") != pid:
                figs["why"] = (f"rank {rank}'s restart came from pid {first.get('pid')}, not from its process "
                               f"(pid {pid}, which the harness saw spawn): not the same process")
                return self.failed, figs
            iteration = first.get("iteration")
            if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 1:
                figs["why"] = (f"rank {rank}'s restart carries iteration {iteration!r}: a restart is the wrapper's "
                               f"iteration 1 or later")
                return self.failed, figs
            trained = [r for r in own if r.ev == "step" and r.t > first.t]
            if not trained:
                figs["why"] = f"rank {rank} (pid {pid}) restarted in process and never trained a step after it"
                return self.failed, figs
            if trained[0].get("pid") != pid:
                figs["why"] = (f"rank {rank}'s first step after its restart came from pid {trained[0].get('pid')}, "
                               f"not its process (pid {pid})")
                return self.failed, figs
            latency[rank] = round(trained[0].t - t0, 3)
            iterations[rank] = iteration
        worst = max(latency.values())
        figs.update(latency_s=latency, iteration=iterations, max_s=self.config.max_s)
        if worst > self.config.max_s:
            figs["why"] = (f"every rank restarted in its own process, the slowest trained again {worst:.2f} s after it, "
                           f"beyond the bound of {self.config.max_s:g} s")
            return self.failed, figs
        figs["why"] = (f"all {len(ranks)} rank(s) of attempt {attempt} restarted in their own processes (iteration "
                       f"{max(iterations.values())}, no new process) and trained again within {worst:.2f} s "
                       f"(bound {self.config.max_s:g} s)")
        return None, figs


def _attempt_at(history: Any, t: float, ranks: Any) -> str | None:
    """The attempt the workload was reporting from at ``t`` (from ``ranks``' records when the fault names ranks)."""
    wanted = set(r for r in ranks if isinstance(r, int)) if isinstance(ranks, list) else None
    before = [r for r in history.records if r.source != "harness" and r.t <= t and isinstance(r.get("attempt"), str)
              and (wanted is None or r.get("rank") in wanted)]
    return str(before[-1].get("attempt")) if before else None
