"""``chaos gameday PLAN``: play a seeded failure mix over one long run, watched live; Ctrl-C stops and reverts."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from chaos.commands.report import write_html
from chaos.report import metrics
from chaos.report.console import make_console
from chaos.report.journal import Journal
from chaos.errors import ExperimentError, UsageError
from chaos.spec.experiment import Experiment
from chaos.spec.load import load_experiment
from chaos.spec.gameday import describe
from chaos.run.session import plan_experiment, run_experiment
from chaos.evidence.goodput import CAUSES, Goodput, compute_goodput
from chaos.report.terminal import print_report
from chaos.run.progress import LiveState

REFRESH_S = 0.5
"""How often the live view redraws."""
SPLIT_EVERY_S = 5.0
"""How often it recomputes the goodput split, which reads the whole history (0.2 s of CPU at the end of
a 20-minute run here): the harness must not compete with the ranks it is watching."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gameday", help="play a seeded failure mix over one long run, watched live (Ctrl-C stops "
                                       "and reverts)")
    p.add_argument("plan", metavar="PLAN", help="an experiment file with a gameday: section")
    p.add_argument("--runs-dir", default="runs", help="where the run directory is created (default: ./runs)")
    p.add_argument("--dry-run", action="store_true", help="print the drawn schedule and every action; run nothing")
    p.add_argument("--no-live", action="store_true",
                   help="print a status line every 10 s instead of the live view (the default when not a terminal)")
    metrics.add_arguments(p)
    p.set_defaults(func=gameday)


def load_plan(path: str) -> Experiment:
    try:
        exp = load_experiment(path)
    except ExperimentError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        raise SystemExit(2) from None
    if exp.gameday is None:
        raise UsageError(f"{path} has no 'gameday:' section, so there is no failure mix to play; add one (see "
                         f"experiments/gameday-smoke-ddp.yaml) or run it with 'chaos run'")
    return exp


def gameday(args: argparse.Namespace) -> int:
    console = make_console()
    exp = load_plan(args.plan)
    runs_root = Path(args.runs_dir)
    if args.dry_run:
        console.print(f"[bold]{exp.name}[/] (dry run: nothing is executed)")
        for line in plan_experiment(exp, runs_root):
            console.print(f"  {escape(line)}")
        return 0
    assert exp.gameday is not None
    for line in describe(exp.gameday, exp.schedule, exp.target_kind):
        console.print(f"[dim]{escape(line)}[/]")
    outputs = metrics.outputs_of(args)
    view = LiveView(exp)
    live = console.is_terminal and not args.no_live
    outputs.start()
    try:
        if live:
            with Live(view.render(None), console=console, refresh_per_second=4, transient=False) as screen:
                report = run_experiment(exp, runs_root, echo=view.note,
                                        on_poll=outputs.poller(exp.name, lambda s: view.update(s, screen)))
        else:
            report = run_experiment(exp, runs_root, echo=lambda m: console.print(f"  [dim]{escape(m)}[/]"),
                                    on_poll=outputs.poller(exp.name, lambda s: view.line(s, console)))
    finally:
        outputs.close()
    print_report(report, console)
    outputs.after_run(report.run_dir, console)
    html = write_html(Journal.read(report.run_dir), report.run_dir)
    console.print(f"report: {html}")
    return report.exit_code


def _split(state: LiveState) -> Goodput:
    now = time.time()
    return compute_goodput(state.history, state.faults, now=now, launched=now - state.now)


class LiveView:
    """The on-call screen: progress, attempt, faults struck and coming, goodput so far, latest notes."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp
        self._split: Goodput | None = None
        self._split_at = float("-inf")
        self.notes: list[str] = []
        self._last = 0.0
        self._line_at = 0.0
        self._rate: list[tuple[float, int]] = []

    def note(self, message: str) -> None:
        self.notes = (self.notes + [message])[-4:]

    def _due(self, state: LiveState) -> bool:
        if state.now - self._last < REFRESH_S:
            return False
        self._last = state.now
        self._rate = [(t, s) for t, s in self._rate if state.now - t <= 10] + [(state.now, state.max_step)]
        return True

    def split(self, state: LiveState) -> Goodput:
        if self._split is None or state.now - self._split_at >= SPLIT_EVERY_S:
            self._split, self._split_at = _split(state), state.now
        return self._split

    def steps_per_s(self) -> float:
        if len(self._rate) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def update(self, state: LiveState, screen: Live) -> None:
        if self._due(state):
            screen.update(self.render(state))

    def line(self, state: LiveState, console: Console) -> None:
        if self._due(state) and state.now - self._line_at >= 10:
            self._line_at = state.now
            split = self.split(state)
            console.print(f"  {state.now:6.0f} s  step {state.max_step}  {self.steps_per_s():.1f} steps/s  attempt "
                          f"{state.attempt}  faults {sum(f.injected for f in state.faults)}/{len(self.exp.schedule)}"
                          f"  goodput {(split.goodput or 0):.0%}")

    def render(self, state: LiveState | None) -> Group:
        head = Table.grid(padding=(0, 2))
        if state is None:
            head.add_row(f"[bold]{self.exp.name}[/]", "starting ...")
            return Group(head)
        split = self.split(state)
        restarts = max(0, len({str(r.get("attempt")) for r in state.history.of("start")}) - 1)
        head.add_row(f"[bold]{self.exp.name}[/]", f"{state.now:.0f} s", f"step {state.max_step}",
                     f"{self.steps_per_s():.1f} steps/s", f"attempt {state.attempt}", f"restarts {restarts}",
                     f"goodput so far [bold]{(split.goodput or 0):.0%}[/]")
        faults = Table(box=None, pad_edge=False, title=None)
        faults.add_column("fault")
        faults.add_column("state")
        for f in state.faults[-4:]:
            status = ("active" if f.t_revert is None and f.injected else
                      "reverted" if f.injected else f"failed: {f.error}")
            faults.add_row(escape(f.label), escape(status))
        for label, trigger in state.upcoming[:3]:
            faults.add_row(f"[dim]{escape(label)}[/]", f"[dim]next, {escape(trigger)}[/]")
        badput = "  ".join(f"{c} {split.seconds[c]:.1f}s" for c in CAUSES
                           if c != "productive" and split.seconds[c] >= 0.05)
        parts = [head, faults, f"[dim]badput: {badput or 'none yet'}[/]"]
        parts += [f"[dim]{escape(n)}[/]" for n in self.notes]
        return Group(*parts)
