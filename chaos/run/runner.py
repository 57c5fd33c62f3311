"""The run loop: prepare the target, launch, follow events, fire faults, revert everything, judge."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from chaos.runtime.context import HarnessLog, RunContext
from chaos.errors import ChaosError, UsageError
from chaos.evidence.events import EventTail
from chaos.evidence.rounds import round_labels
from chaos.spec.experiment import Experiment
from chaos.runtime.clock import SYSTEM, Clock
from chaos.health.relaunch import next_launch, relaunch
from chaos.runtime.host_speed import PROBE_PROCS, probe_s
from chaos.report.journal import Journal, write_junit
from chaos.runtime.launch import with_run_dir
from chaos.runtime.ledger import Ledger
from chaos.evidence.outcome import (CheckResult, FaultRecord, RunOutcome, RunReport, exit_code_for, judge_faults,
                           judge_protocol)
from chaos.runtime.processes import Worker
from chaos.evidence.recovery import compute_recovery
from chaos.run.armed import Armed, upcoming
from chaos.run.judge import judge_checks
from chaos.run.plugins import build_fault, build_trigger
from chaos.run.progress import LiveState, Progress
from chaos.run.rundir import LineTail, new_run_dir, regex_steps, stamp, tail_text
from chaos.registry import CHECKS, TARGETS
from chaos.runtime.safety import stop_run_processes
from chaos.runtime.shell import Shell
from chaos.runtime.slowfs import OPLOG_NAME
from chaos.sdk import HOLDS_DIR
from chaos.triggers.base import TriggerState
from chaos.evidence.pointer import watches_for
from chaos.evidence.witness import CheckpointWitness

POLL_S = 0.05


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the harness: stop the workload, revert every fault, report."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: workload stopped, faults reverted")


class Runner:
    """Runs one experiment. ``clock`` (chaos.runtime.clock) is the run's one time source: the loop's waits and
    every stamp it, its log, its ledger and its faults write; ``golden`` provides the reference run."""

    def __init__(self, experiment: Experiment, *, runs_root: Path | str = "runs", dry_run: bool = False,
                 golden: Callable[[], dict[str, Any]] | None = None, echo: Callable[[str], None] | None = None,
                 clock: Clock = SYSTEM,
                 on_poll: Callable[[LiveState], None] | None = None,
                 stop_rule: Callable[[float, int, int], str | None] | None = None,
                 independent_faults: bool = False, probe_host: bool = True, scan_values: bool | None = None) -> None:
        self.exp = experiment
        self.on_poll = on_poll
        self.stop_rule = stop_rule
        """Asked at every poll with (seconds since launch, max step, attempts spawned); a reason ends the run
        early (a game day's stop rules, chaos.gameday.stop)."""
        self.independent_faults = independent_faults
        """Each fault's recovery ends where the next one strikes (a game day's independent draws)."""
        self.probe_host = probe_host
        """Measure the host's speed around the run for the baseline gate (a golden run, never gated, does not)."""
        self.scan_values = scan_values
        """Scan every committed checkpoint's tensors (chaos.checkpoint.values); None: when a check needs it."""
        self.runs_root = Path(runs_root)
        self.dry_run = dry_run
        self.golden = golden
        self.echo = echo or (lambda _msg: None)
        self.clock = clock
        self._signals = 0
        self._round_members: dict[int, list[tuple[Worker, str]]] = {}
        """Each round's workers, with the attempt each reported when first seen."""
        self._round_label: dict[int, str] = {}
        self._finishing = False
        self._reverted = False
        self._last_inject: float | None = None
        self._last_inject_t: float | None = None
        self._t0 = clock.mono()

    # ----------------------------------------------------------------------------------- setup

    def _context(self, create: bool = True) -> RunContext:
        if not create:  # --dry-run: name the directory a run would use, touch nothing
            run_dir = self.runs_root / f"{self.exp.name}-{stamp(self.clock)}-{os.getpid()}"
            try:
                os.stat(run_dir)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:  # a name too long, a NUL byte: say so, not a traceback
                raise UsageError(f"unusable --runs-dir '{self.runs_root}': {getattr(exc, 'strerror', None) or exc}; "
                                 f"pass a writable folder with a shorter path") from None
        else:
            try:
                run_dir = new_run_dir(self.runs_root, self.exp.name, self.clock)
            except (OSError, ValueError) as exc:  # ValueError: a NUL byte in --runs-dir
                raise UsageError(f"cannot create the run directory under '{self.runs_root}': "
                                 f"{getattr(exc, 'strerror', None) or exc}; "
                                 f"pass a writable --runs-dir") from None
            (run_dir / "events").mkdir()
        ckpt_dir = self.exp.workload.ckpt_dir
        ckpt = Path(with_run_dir(ckpt_dir, run_dir)) if ckpt_dir else run_dir / "ckpt"
        if create:
            ckpt.mkdir(parents=True, exist_ok=True)
        log = HarnessLog(run_dir / "harness.jsonl" if create else None, self.clock)
        target_cls = TARGETS.get(self.exp.target_kind)
        ctx = RunContext(experiment=self.exp, run_dir=run_dir, ckpt_dir=ckpt, ledger=Ledger(run_dir, self.clock),
                         shell=Shell(log, dry_run=self.dry_run), log=log,
                         rng=random.Random(self.exp.seed), dry_run=self.dry_run, clock=self.clock)
        ctx.target = target_cls(self.exp.target)
        return ctx

    def plan(self) -> list[str]:
        """Every action the run would take, with exact commands, running none of them."""
        run = self._context(create=False)
        lines = [f"run directory: {run.run_dir}"]
        lines += run.target.plan(run)
        for spec in self.exp.faults:
            fault = build_fault(spec)
            for line in fault.plan(run):
                lines.append(f"fault {fault.label} when {spec.trigger.describe()}: {line}")
        lines.append("at the end: kill the process tree, revert every fault (ledger in reverse), run checks")
        return lines

    # ----------------------------------------------------------------------------------- run

    def run(self) -> RunReport:
        run = self._context()
        self.run_ctx = run
        scan = self.scan_values if self.scan_values is not None else \
            any(getattr(CHECKS.get(c.kind), "scans_values", False) for c in self.exp.checks)
        self.witness = CheckpointWitness(run.log, pin_dir=run.run_dir.resolve() / ".witness-pins", scan_values=scan)
        self.pointers = watches_for(self.exp.checks, run.ckpt_dir, run.log, oplog=run.run_dir.absolute() / OPLOG_NAME)
        # Held until the report is written, not only through the reverts: an interrupt that lands while
        # the checks run or journal.json is written must not cut the run's record short.
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run(run)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def _run(self, run: RunContext) -> RunReport:
        armed: list[Armed] = []
        records: list[FaultRecord] = []
        diagnostics: list[str] = []
        exit_code: int | None = None
        timed_out = False
        start = self.clock.mono()
        wall0 = self.clock.wall()
        revert_failures: list[str] = []
        harness_error: str | None = None
        interrupted_by: int | None = None
        tail_output = ""
        tail = EventTail(run.events_dir, validate=True)
        self.progress = Progress(history=run.history)
        try:
            run.ledger.open(dirs=[run.ckpt_dir, *run.target.owned_dirs(run)])
            run.target.check(run)
            armed = [Armed(s, build_fault(s), build_trigger(s.trigger)) for s in self.exp.faults]
            for a in armed:
                a.fault.check(run)
                run.target.admit(run, a.fault.kind, a.fault.config)
            run.target.prepare(run)
            for a in armed:
                a.fault.prepare(run)
            for a in armed:
                a.arm_hold(run)
            self._probe_host(run, "before")
            run.log("launch", launch=run.launch_no, target=self.exp.target_kind,
                    nodes=run.target.node_count, experiment=self.exp.name)
            self._t0 = self.clock.mono()
            # A fault that is there when the job starts (triggers.before_launch) acts before the launch; the
            # run's clock (after_s, timeout_s) starts once it has, so a slow injection eats none of the job's time.
            self._fire(run, [a for a in armed if a.trigger.before_launch], records,
                       TriggerState(now=0.0, rng=run.rng))
            start = self._t0 = self.clock.mono()
            run.target.launch(run)
            self.witness.start()
            for watch in self.pointers:
                watch.start()
            exit_code, timed_out = self._loop(run, tail, armed, records, diagnostics, start)
        except Interrupted as exc:
            harness_error = str(exc)
            interrupted_by = exc.signum
            diagnostics.append(str(exc))
        except ChaosError:
            raise
        except Exception as exc:  # a bug in a fault, target or trigger: still revert all, then report it
            harness_error = f"harness error: {type(exc).__name__}: {exc}"
            diagnostics.append(harness_error)
            run.log("harness_error", error=harness_error, traceback=traceback.format_exc())
        finally:
            self._finishing = True
            for watch in self.pointers:  # before the reverts: a mount's copy-back is no move of the workload's
                watch.close()
            try:
                revert_failures = self._finish(run, armed, records)
                self.witness.close()
            finally:
                self._reverted = True
        wall_s = self.clock.mono() - start
        records += self._unfired(armed)
        run.log("exit", code=exit_code, timed_out=timed_out, wall_s=round(wall_s, 3))
        # After the exit record: the run's wall time (and the goodput split, which ends at that record)
        # must not include the probe itself (half a second of a loaded box made the split and the wall
        # clock disagree by more than the 1 % tests/integration/test_goodput_known_costs.py allows).
        if interrupted_by is None:
            self._probe_host(run, "after")
        # The one history the loop kept is the run's record: what the ranks wrote until they were
        # stopped, and everything the harness logged, read as harness.jsonl says it; no second pass.
        self.progress.fold(tail.poll(), run.log.drain(), [])
        history = self.progress.history
        history.malformed = list(tail.bad_lines)
        history.align_attempts()
        for rec in records:
            if rec.injected:
                rec.recovery = compute_recovery(history, rec, until=self._next_fault(records, rec),
                                                others=[r for r in records if r.injected and r is not rec])
        tail_output = tail_text(run.run_dir / "output.log")
        outcome = RunOutcome(
            experiment=self.exp, run_dir=run.run_dir, ckpt_dir=run.ckpt_dir, history=history,
            exit_code=exit_code, timed_out=timed_out, wall_s=wall_s, faults=records,
            diagnostics=diagnostics, golden=self.golden, output_tail=tail_output)
        results = judge_faults(records, history.max_step()) if harness_error is None else []
        if history.malformed:
            results.append(judge_protocol(history.malformed))
        results += judge_checks(self.exp.checks, outcome)
        if revert_failures:
            results.append(CheckResult("revert", "error", f"{len(revert_failures)} revert(s) failed: "
                                       + "; ".join(revert_failures)))
        code = exit_code_for(results, harness_error=harness_error is not None, interrupted_by=interrupted_by)
        report = RunReport(outcome, results, run.run_dir, code, revert_failures)
        journal = Journal.of_run(report, wall0)
        journal.write(run.run_dir)
        write_junit(journal, run.run_dir)
        return report

    def _probe_host(self, run: RunContext, when: str) -> None:
        """How fast the host is around the run (chaos.runtime.host_speed): the gate compares timing figures at
        the baseline's speed. Measured with nothing of the workload running, so it sees only the host."""
        if self.probe_host:
            run.log("host_speed", when=when, probe_s=probe_s(), procs=PROBE_PROCS)

    def _next_fault(self, records: list[FaultRecord], rec: FaultRecord) -> float | None:
        """A game day's faults are independent draws: each one's recovery ends where the next one strikes."""
        if not self.independent_faults or rec.t_inject is None:
            return None
        later = [r.t_inject for r in records if r.injected and r.t_inject is not None and r.t_inject > rec.t_inject]
        return min(later, default=None)

    @staticmethod
    def _unfired(armed: list[Armed]) -> list[FaultRecord]:
        """Faults whose trigger never fired, or whose delayed injection was still due when the run ended."""
        out = []
        for a in armed:
            base = dict(index=a.fault.index, kind=a.fault.kind, label=a.fault.label, t_inject=None,
                        details={"trigger": a.spec.trigger.describe()}, optional=a.fault.config.optional)
            # A repeating trigger that fired and has one more draw still delayed at the end did act.
            if a.fires == 0:
                out.append(FaultRecord(**base, status="pending" if a.due else "never_fired"))
        return out

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        run = getattr(self, "run_ctx", None)
        if self._reverted or (self._finishing and run is not None and not run.ledger.pending()):
            # Nothing is left to revert (the reverts are done, or done but for closing up): finish judging
            # and writing the report, which is the run's record; skipping it would save nothing.
            print("interrupted: the faults are reverted; finishing the report", file=sys.stderr, flush=True)
            return
        if self._signals == 1 and self._finishing:
            # Raising now would abort the reverts under way: let them finish unless asked twice.
            print("interrupted: reverting every fault; interrupt again to skip the reverts", file=sys.stderr, flush=True)
            return
        if self._signals == 1:
            raise Interrupted(signum)
        # A second Ctrl-C: skip the reverts, but say exactly what is left and how to undo it.
        lines = ["second interrupt: skipping reverts. Left behind:"]
        if run is not None:
            for entry in run.ledger.pending():
                lines.append(f"  [{entry.owner}] {entry.undo.describe()}")
            lines.append(f"undo all of it with: chaos cleanup {run.run_dir}")
        print("\n".join(lines), file=sys.stderr, flush=True)
        os._exit(130)

    def _ends(self, run: RunContext, diagnostics: list[str], kind: str, message: str, **fields: Any) -> tuple[int | None, bool]:
        """The run ends before its workload did, saying why (a stall, a hold, a game day's stop rule)."""
        diagnostics.append(message)
        run.log(kind, message=message, **fields)
        self.echo(message)
        return run.target.exit_code(), False

    def _loop(self, run: RunContext, tail: EventTail, armed: list[Armed], records: list[FaultRecord],
              diagnostics: list[str], start: float) -> tuple[int | None, bool]:
        step_re = re.compile(self.exp.workload.step_regex) if self.exp.workload.step_regex else None
        out_tail = LineTail(run.run_dir / "output.log") if step_re else None
        known: dict[tuple[int, float], Worker] = {}
        progress = self.progress
        while True:
            now = self.clock.mono() - start
            workload = tail.poll()
            self._watch_workers(run, known, progress)
            seen = regex_steps(run, out_tail, step_re, progress.newest_attempt) if out_tail is not None else []
            new = progress.fold(workload, run.log.drain(), seen, now_s=now)
            self.witness.observe(new)
            for stuck in progress.newly_stuck(now, self.exp.workload.join_timeout_s):
                diagnostics.append(stuck.message)
                run.log("stuck", attempt=stuck.attempt, joined=stuck.joined, world_size=stuck.world_size,
                        message=stuck.message)
                self.echo(stuck.message)
            if progress.still_stuck:
                # A rendezvous that has not completed in join_timeout_s will not: waiting only burns time.
                return run.target.exit_code(), False
            stall = progress.stalled(now, self.exp.workload.stall_s)
            if stall is not None:
                return self._ends(run, diagnostics, "stalled", stall.message, idle_s=round(stall.idle_s, 3),
                                  stall_s=stall.stall_s)
            held = run.target.blocked(run)  # e.g. a pod the cluster cannot start
            if held is not None:
                return self._ends(run, diagnostics, "blocked", held)
            max_step = progress.max_step
            stop = self.stop_rule(now, max_step, len(progress.spawned)) if self.stop_rule is not None else None
            if stop is not None:
                return self._ends(run, diagnostics, "gameday_stop", f"game day stopped: {stop}", reason=stop)
            # Read before the triggers: a fault must not strike a workload that has already ended (a gate
            # that failed on its own would look as if the fault had made it fail: chaos/gate/cell.py).
            code = run.target.exit_code()
            if code is None:
                state = TriggerState(now=now, step=max_step, new_events=new, rng=run.rng,
                                     last_inject=self._last_inject, last_inject_t=self._last_inject_t,
                                     ckpt_dir=run.ckpt_dir)
                self._fire(run, armed, records, state)
            if self.on_poll is not None:
                try:
                    self.on_poll(LiveState(now, max_step, progress.newest_attempt,
                                           progress.history, records, upcoming(armed), run.run_dir))
                except Exception as exc:  # a broken view must not end a game day: drop it, say so, go on
                    self.on_poll = None
                    run.log("live_view_error", error=f"{type(exc).__name__}: {exc}")
                    self.echo(f"live view stopped ({type(exc).__name__}: {exc}); the run goes on")
            if code is not None:
                run.log("workload_exit", code=code)
                # One last read: events flushed just before the agent exited.
                last = progress.fold(tail.poll(), run.log.drain(), [])
                self.witness.observe(last)
                # The health monitor may have excluded a device and stopped the launch for it:
                # play the scheduler and relaunch without it (chaos/health/relaunch.py).
                change = next_launch(run, code)
                if change is None:
                    return code, False
                relaunch(run, change)
                self.echo(f"relaunched without device(s) {[e.get('device') for e in change.excluded]}: "
                          f"nproc_per_node {change.nproc_per_node}")
                continue
            if now > self.exp.timeout_s:
                run.log("timeout", timeout_s=self.exp.timeout_s)
                return None, True
            self.clock.sleep(POLL_S)

    def _watch_workers(self, run: RunContext, known: dict, progress: Progress) -> None:
        current = {w.key: w for w in run.tree.workers()}
        for key, w in current.items():
            if key not in known:
                reported = w.attempt(run.launch_no)
                self._round_members.setdefault(w.generation, []).append((w, reported))
                # One round, one attempt (the rule of History.align_attempts, chaos/evidence/rounds.py): what a
                # rank writes belongs to the round the harness saw it in, whatever attempt it wrote.
                independent = bool(getattr(run.tree, "independent_nodes", False))
                labels = round_labels(((g, [(m.node, a) for m, a in members])
                                       for g, members in sorted(self._round_members.items())), independent)
                for g, label in labels.items():
                    if g == w.generation or self._round_label.get(g) != label:
                        self._round_label[g] = label
                        for m, _ in self._round_members[g]:
                            run.history.set_attempt(m.node, m.pid, label)
                progress.spawn(labels[w.generation], self.clock.mono() - self._t0,
                               ((m.node, m.rank) for m, _ in self._round_members[w.generation]))
                # started: when the process began, on its node's clock as its records' t (History.node_of bounds a
                # record placed by its pid alone to that worker's life).
                run.log("worker_spawn", worker_pid=w.pid, started=round(w.create_time, 3), rank=w.rank, node=w.node,
                        attempt=reported,
                        generation=w.generation, launch=w.launch, **({"independent": True} if independent else {}))
        for key, w in known.items():
            if key not in current:
                run.log("worker_exit", worker_pid=w.pid, rank=w.rank, node=w.node,
                        attempt=self._round_label.get(w.generation, w.attempt(run.launch_no)))
        known.clear()
        known.update(current)

    def _fire(self, run: RunContext, armed: list[Armed], records: list[FaultRecord], state: TriggerState) -> None:
        for a in armed:
            limit = a.max_fires
            if (limit is None or a.fires + len(a.due) < limit) and a.trigger(state):
                a.due.append(state.now + a.spec.trigger.delay_s)
            for due in [d for d in a.due if d <= state.now]:
                a.due.remove(due)
                a.fires += 1
                try:
                    records.append(a.inject(run, self.clock, self._t0, self.echo))
                finally:
                    a.release_hold(run)
                # The triggers polled after this one see it (in_training's gap_s).
                self._last_inject = state.last_inject = self.clock.mono() - self._t0
                self._last_inject_t = state.last_inject_t = records[-1].t_inject or state.last_inject_t  # wall time
            for rec, until in list(a.active):
                if until is not None and state.now >= until:
                    a.revert(run, rec, self.clock)
                    rec.t_release = rec.t_revert
                    a.active.remove((rec, until))

    def _finish(self, run: RunContext, armed: list[Armed], records: list[FaultRecord]) -> list[str]:
        """Stop the workload and revert everything, whatever happened; every revert is attempted."""
        failures: list[str] = []
        # No rank may wait at a held step while the run is torn down (a fault that never fired).
        shutil.rmtree(run.run_dir / HOLDS_DIR, ignore_errors=True)
        try:
            run.target.stop(run)
            # Workers the launcher lost track of (re-parented, own session) still carry CHAOS_RUN_DIR.
            stray = stop_run_processes(run.run_dir)
            if stray:
                run.log("stray_processes", pids=stray)
        except Exception as exc:  # keep going: the reverts below matter more than this error
            failures.append(f"stop workload: {exc}")
        for a in armed:
            for rec, _until in a.active:
                try:
                    a.revert(run, rec, self.clock)
                    failures += rec.revert_errors
                except Exception as exc:
                    failures.append(f"{a.fault.label}: {exc}")
            a.active.clear()
        try:
            failures += [f"{f.owner}: {f.action}: {f.error}" for f in run.target.teardown(run)]
        except Exception as exc:
            failures.append(f"target teardown: {exc}")
        # Anything still in the ledger (a fault that never recorded itself as active) goes too.
        failures += [f"{f.owner}: {f.action}: {f.error}" for f in run.ledger.revert(run.shell)]
        run.ledger.close()
        return failures
