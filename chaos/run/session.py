"""The one way to run an experiment: the fault-free (golden) reference, the game day's rules, the runner.

``chaos run``, ``chaos gameday`` and the pytest plugin all start runs here, so an experiment runs the
same whichever way it is started. A game day plugs into the runner from outside: its stop rules and
its policy that each drawn fault's recovery ends where the next strikes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from chaos.evidence.outcome import RunReport
from chaos.gameday.stop import StopRules
from chaos.run.golden import Golden
from chaos.run.progress import LiveState
from chaos.run.runner import Runner
from chaos.spec.experiment import Experiment
from chaos.spec.gameday import describe


def build_runner(exp: Experiment, runs_root: Path | str, *, golden: bool = True,
                 echo: Callable[[str], None] | None = None,
                 on_poll: Callable[[LiveState], None] | None = None) -> Runner:
    """The runner for ``exp``, with its golden reference (cached per workload config) and, for a game day,
    its stop rules and fault policy."""
    runs_root = Path(runs_root)
    day = exp.gameday
    return Runner(exp, runs_root=runs_root, golden=Golden(exp, runs_root) if golden else None, echo=echo,
                  on_poll=on_poll, stop_rule=StopRules(day.stop) if day is not None else None,
                  independent_faults=day is not None)


def run_experiment(exp: Experiment, runs_root: Path | str, *, golden: bool = True,
                   echo: Callable[[str], None] | None = None,
                   on_poll: Callable[[LiveState], None] | None = None) -> RunReport:
    """Run ``exp`` once, judge it, and write its journal; the report says the verdicts and exit code."""
    return build_runner(exp, runs_root, golden=golden, echo=echo, on_poll=on_poll).run()


def plan_experiment(exp: Experiment, runs_root: Path | str) -> list[str]:
    """Every action a run of ``exp`` would take, with exact commands, running none of them (``--dry-run``)."""
    lines = []
    if exp.gameday is not None:
        lines += [f"game day: {line}" for line in describe(exp.gameday, exp.schedule, exp.target_kind)]
    plan = Runner(exp, runs_root=Path(runs_root), dry_run=True).plan()
    return plan[:1] + lines + plan[1:]
