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
from chaos.evidence.harness_records import WorkerExit, WorkerSpawn
from chaos.evidence.records import InprocessRestart


class RestartedInProcessConfig(CheckConfig):
    max_s: float = Field(default=60.0, gt=0, le=24 * 3600)
    """Bound on the restart's latency: from the fault to the step every rank trained again in its own process (on
    gloo: the healthy ranks' collective timeout, which NVRx cannot abort, plus the wrapper's barriers)."""
    faults: list[str] | None = None
    """The fault kinds that must each be followed by an in-process restart (every injected fault when unset): a fault
    that only sets the scene, such as a peer frozen for a few seconds while the judged fault strikes, is left out
    (and a judged fault's evidence ends where the next judged one struck)."""


class RestartedInProcess(Check, kind="restarted_in_process"):
    """Every rank of the struck attempt restarted in its own process (no new worker process) and trained again within max_s."""

    Config = RestartedInProcessConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        kinds = self.config.faults
        faults = sorted((f for f in outcome.injected_faults if f.injected and f.t_inject is not None
                         and (kinds is None or f.kind in kinds)), key=lambda f: float(f.t_inject or 0.0))
        if not faults:
            which = "no fault" if kinds is None else f"no {' or '.join(kinds)} fault"
            return self.inconclusive(f"{which} was injected, so nothing had to restart in process")
        figures: dict[str, Any] = {}
        for k, fault in enumerate(faults):
            # A fault's evidence ends where the next one struck: a restart after that is the next fault's.
            end = float(faults[k + 1].t_inject or 0.0) if k + 1 < len(faults) else float("inf")
            problem, figs = self._judge(fault, outcome, end)
            figures[fault.label] = figs
            if problem is not None:
                return problem(f"{fault.label}: {figs['why']}", **figures)
        return self.passed("; ".join(f"{label}: {figs['why']}" for label, figs in figures.items()), **figures)

    def _judge(self, fault: FaultRecord, outcome: RunOutcome, end: float) -> tuple[Any, dict[str, Any]]:
        h = outcome.history
        t0 = float(fault.t_inject or 0.0)
        figs: dict[str, Any] = {}
        before_next = "" if end == float("inf") else " before the next fault"
        spawns = [r for r in h.harness(WorkerSpawn) if r.worker_pid is not None]
        later = sorted({r.worker_pid for r in spawns if t0 < r.t < end})
        if later:
            first = min(r.t for r in spawns if t0 < r.t < end)
            figs["why"] = (f"new worker process(es) {later} were spawned {first - t0:.1f} s after it: the job escalated to "
                           f"a process restart, not an in-process one")
            return self.failed, figs
        attempt = fault.details.get("attempt")
        if not isinstance(attempt, str):
            # A fault inside the step (chaos.instep) acts in whatever attempt runs when it lands: the one its ranks
            # were reporting from when it was injected.
            attempt = _attempt_at(h, t0, fault.details.get("ranks"))
        if attempt is None:
            figs["why"] = ("neither its record nor the ranks' records before it say which attempt it struck, so there "
                           "are no ranks to hold to it")
            return self.inconclusive, figs
        # A process is (host, pid): the harness names the node it spawned a worker on, a worker's records the host
        # the history placed them on (the harness's name for the node, whatever the process wrote: History.node_of);
        # pids repeat across nodes.
        exits = {(str(r.node), r.worker_pid): r.t for r in h.harness(WorkerExit)}
        alive: dict[tuple[str, Any], Any] = {}
        for r in spawns:
            key = (str(r.node), r.worker_pid)
            if r.t <= t0 and str(r.attempt) == attempt and exits.get(key, float("inf")) > t0:
                alive[key] = r.rank
        if not any(str(r.attempt) == attempt for r in spawns):
            figs["why"] = (f"the harness saw no worker of attempt {attempt} spawn (a target whose processes it does not "
                           f"watch), so no rank's process can be held to its restart")
            return self.inconclusive, figs
        named = {r for r in fault.details.get("ranks") or [] if isinstance(r, int) and not isinstance(r, bool)}
        ranks = sorted({r for r in h.attempt_ranks().get(attempt, set()) if isinstance(r, int)}
                       | {r for r in alive.values() if isinstance(r, int)} | named)
        if not ranks:
            figs["why"] = f"attempt {attempt}, which it struck, reported no rank"
            return self.inconclusive, figs
        workload = [r for r in h.records if not r.harness and r.source != "output"]
        latency: dict[int, float] = {}
        iterations: dict[int, int] = {}
        for rank in ranks:
            problem, why, figures = self._rank(rank, attempt, t0, end, alive, exits, workload, before_next)
            if problem is not None:
                figs["why"] = why
                return problem, figs
            latency[rank], iterations[rank] = figures
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

    def _rank(self, rank: int, attempt: str, t0: float, end: float, alive: dict[tuple[str, Any], Any],
              exits: dict[tuple[str, Any], float], workload: list[Any], before_next: str) -> tuple[Any, str, Any]:
        """(verdict or None, why, (latency, iteration)) for one rank of the struck attempt."""
        own = [r for r in workload if r.rank == rank]
        after = [r for r in own if t0 < r.t < end]
        procs = [key for key, r in alive.items() if r == rank]
        if len(procs) > 1:
            return (self.failed, f"processes {sorted(procs)} were all rank {rank} when it struck: which one restarted "
                    f"is not one process's story", None)
        if not procs:
            if after:
                return (self.failed, f"rank {rank} had no live process the harness saw when it struck (its process had "
                        f"exited, or was never seen), yet records after it speak for rank {rank}", None)
            return self.inconclusive, f"rank {rank} had no live process the harness saw when it struck", None
        key = procs[0]
        name = f"rank {rank} ({key[0]}, pid {key[1]})"
        before = {_process(r) for r in own if r.t <= t0 and str(r.attempt) == attempt}
        if key not in before:
            return self.inconclusive, f"{name} wrote nothing before it: nothing to hold its restart to", None
        if before - {key}:
            return (self.failed, f"records of rank {rank} before it came from {sorted(before - {key})} as well as from "
                    f"its process {key}: not one process's story", None)
        strangers = {_process(r) for r in after} - {key}
        if strangers:
            return (self.failed, f"records of rank {rank} after it came from {sorted(strangers)}, not its process "
                    f"{key}: another process took over the rank", None)
        relabeled = sorted({str(r.attempt) for r in after} - {attempt})
        if relabeled:
            return (self.failed, f"records of {name} after it claim attempt(s) {relabeled}: a restart in the same "
                    f"process stays in attempt {attempt}", None)
        gone = exits.get(key)
        if gone is not None and after and gone < max(r.t for r in after):
            return (self.failed, f"{name} exited {gone - t0:.1f} s after it, yet records from it run to "
                    f"{max(r.t for r in after) - t0:.1f} s: a dead process restarted nothing", None)
        restarts = [r for r in after if isinstance(r, InprocessRestart)]
        if not restarts:
            return self.failed, f"{name} reported no in-process restart after it{before_next}", None
        prior = [r.iteration for r in own if isinstance(r, InprocessRestart) and r.t <= t0
                 and _process(r) == key and isinstance(r.iteration, int)]
        floor = max(prior, default=0)
        last = floor
        for r in restarts:
            iteration = r.iteration
            if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration <= last:
                return (self.failed, f"{name}'s restart carries iteration {iteration!r} after iteration {last}: each "
                        f"restart is the wrapper's next iteration, 1 or later", None)
            last = iteration
        trained = [r for r in after if r.ev == "step" and r.t > restarts[0].t]
        if not trained:
            return self.failed, f"{name} restarted in process and never trained a step after it{before_next}", None
        return None, "", (round(trained[0].t - t0, 3), int(restarts[0].iteration))


def _process(r: Any) -> tuple[str, Any]:
    """The (host, pid) that wrote ``r``. Every workload record carries both, whatever its kind (one the protocol
    does not name is an untyped ``Record``), so they are read by name here, not as a kind's attributes."""
    return str(r.get("host")), r.get("pid")


def _attempt_at(history: Any, t: float, ranks: Any) -> str | None:
    """The attempt the workload was reporting from at ``t`` (from ``ranks``' records when the fault names ranks)."""
    wanted = set(r for r in ranks if isinstance(r, int)) if isinstance(ranks, list) else None
    before = [r for r in history.records if not r.harness and r.t <= t and isinstance(r.attempt, str)
              and (wanted is None or r.rank in wanted)]
    return str(before[-1].attempt) if before else None
