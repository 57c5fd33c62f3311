"""``chaos coverage PLAN``: prove a health gate: run it under each fault of the plan and on healthy runs, print the
coverage matrix, and exit 0 only when the plan's requirements hold (a CI gate can require a coverage)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos.errors import ExperimentError, UsageError
from chaos.gate.cell import VERDICT_TEXT, Cell
from chaos.gate.coverage import cell_experiment, describe_gate, label, run_coverage
from chaos.gate.matrix import Coverage
from chaos.report.console import make_console
from chaos.report.metrics import check_textfile
from chaos.spec.load import load_experiment

STYLE = {"caught": "green", "caught_at_deadline": "green", "ok": "green", "missed": "red", "hung": "red",
         "false_alarm": "red", "untested": "yellow", "error": "magenta"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coverage", help="prove a health gate: run it under each fault of a plan and on healthy runs; "
                                        "print what it catches, how fast, and its false alarms")
    p.add_argument("plan", metavar="PLAN", help="an experiment file with a gate: section (e.g. ci/gates/preflight-netns.yaml)")
    p.add_argument("--runs-dir", default="runs", help="where the coverage folder is created (default: ./runs)")
    p.add_argument("--dry-run", action="store_true", help="list the runs it would make; run nothing")
    p.add_argument("--metrics-textfile", metavar="PATH.prom", help="write the matrix as Prometheus metrics here")
    p.add_argument("--metrics-pushgateway", metavar="URL", help="push the matrix's metrics to this Pushgateway")
    p.set_defaults(func=coverage)


def coverage(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        exp = load_experiment(args.plan)
    except ExperimentError as exc:
        for problem in exc.problems:
            print(str(problem), file=sys.stderr)
        return 2
    if exp.gate is None:
        raise UsageError(f"{args.plan} has no 'gate:' section, so there is no health gate to prove; add one (see "
                         f"ci/gates/preflight-netns.yaml) or run it with 'chaos run'")
    check_textfile(args.metrics_textfile)
    if args.metrics_pushgateway and not args.dry_run:
        # A typo in the address fails now, not after every run of the plan.
        from chaos.report.metrics import Outputs

        Outputs(pushgateway=args.metrics_pushgateway).start()
    console.print(f"[bold]{escape(exp.name)}[/]: the gate [cyan]{escape(describe_gate(exp))}[/] on {exp.target_kind}")
    if args.dry_run:
        runs = (["calibration (" + " ".join(exp.gate.calibrate) + ")"] if exp.gate.calibrate else []) \
            + [f"healthy run {i + 1}" for i in range(exp.gate.healthy_runs)] \
            + [f"{label(s)} ({s.trigger.describe()})" for s in exp.faults]
        for run in runs:
            console.print(f"  {escape(run)}")
        cell_experiment(exp, Path(args.runs_dir) / "dry-run", None)  # the derivation itself must not fail
        return 0

    def on_cell(what: str, cell: Cell) -> None:
        secs = "" if cell.seconds is None else f" in {cell.seconds:.2f} s"
        console.print(f"  {escape(what)}: [{STYLE[cell.verdict]}]{VERDICT_TEXT[cell.verdict]}[/]{secs}"
                      f"[dim] - {escape(cell.said or cell.reason)}[/]")

    result = run_coverage(exp, args.runs_dir, echo=lambda m: console.print(f"[dim]{escape(m)}[/]"), on_cell=on_cell)
    print_matrix(console, result)
    from chaos.gate.metrics import export

    export(result, textfile=args.metrics_textfile, pushgateway=args.metrics_pushgateway)
    return result.problems()[0]


def print_matrix(console: Console, cov: Coverage) -> None:
    table = Table(title=f"coverage of the gate on {cov.target}", title_justify="left")
    for col in ("fault", "verdict", "seconds", "the gate said / why"):
        table.add_column(col, overflow="fold")
    for cell in cov.faults + cov.healthy:
        table.add_row(escape(cell.fault or "(no fault)"), f"[{STYLE[cell.verdict]}]{VERDICT_TEXT[cell.verdict]}[/]",
                      "" if cell.seconds is None else f"{cell.seconds:.2f}", escape(cell.said or cell.reason))
    console.print(table)
    code, why = cov.problems()
    cov_text = "n/a" if cov.coverage is None else f"{cov.coverage:.0%}"
    word = {0: "[bold green]PASS[/]", 1: "[bold red]FAIL[/]"}.get(code, "[bold magenta]ERROR[/]")
    console.print(f"{word} {len(cov.caught)} of {len(cov.listed)} faults caught ({cov_text}), "
                  f"{len(cov.false_alarms)} false alarm(s) in {len(cov.healthy)} healthy run(s)")
    for w in why:
        console.print(f"  - {escape(w)}")
    console.print(f"[dim]matrix: {escape(cov.folder)}/coverage.md (and coverage.json; each run's folder beside it)[/]")
