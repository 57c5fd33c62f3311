"""The terminal summary a person reads in five seconds: verdict, faults with recovery figures, checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos.evidence.outcome import look, run_verdict
from chaos.evidence.recovery import FIGURES, SLURM_FIGURES, describe_landing
from chaos.report.console import make_console

if TYPE_CHECKING:
    from chaos.evidence.outcome import RunReport



def _fmt(value: object) -> str:
    return "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))


def recovery_columns(recoveries: list[dict]) -> list[str]:
    """The recovery figures to show: the five every target has, plus Slurm's requeue figures on a slurm run."""
    cols = list(FIGURES)
    if any("requeue_s" in r for r in recoveries):
        cols += SLURM_FIGURES
    return cols


def headline(report: "RunReport") -> tuple[str, str]:
    """The run's one-line verdict and its style: the same words in the terminal, report.md and pytest."""
    o = report.outcome
    shown = look(run_verdict(report.exit_code, [c.verdict for c in report.checks]))
    attempts = o.history.all_attempts()
    text = (f"{shown.label} {o.experiment.name}  {o.wall_s:.1f}s, workload exit {_fmt(o.exit_code)}"
            f"{' (timed out)' if o.timed_out else ''}, {len(attempts)} attempt(s), max step {o.history.max_step()}")
    return text, shown.style


def check_lines(report: "RunReport") -> list[tuple[str, str]]:
    """One (text, style) line per verdict, diagnostics first."""
    lines = [(f"! {d}", "bold yellow") for d in report.outcome.diagnostics]
    for c in report.checks:
        lines.append((f"{look(c.verdict).label:5} {c.kind}: {c.reason}", look(c.verdict).style))
    return lines


def summary_text(report: "RunReport") -> str:
    """The plain-text rendering (pytest's failure report, logs)."""
    return "\n".join([headline(report)[0]] + [f"  {text}" for text, _ in check_lines(report)]
                     + [f"  {report.run_dir}/journal.json"])


def print_report(report: "RunReport", console: Console | None = None) -> None:
    console = console or make_console()
    o = report.outcome
    text, style = headline(report)
    word, rest = text.split(" ", 1)
    console.print(f"[{style}]{word}[/] {escape(rest)}")
    if o.faults:
        cols = recovery_columns([f.recovery for f in o.faults])
        rows = []
        for f in o.faults:
            if f.injected:
                target = ", ".join(f"{k}={v}" for k, v in f.details.items()
                                   if k in ("ranks", "signal", "path", "mode", "node", "nodes", "code"))
            else:
                target = f.error or f.status.replace("_", " ")
            rows.append((f.label, target, [_fmt(f.recovery.get(k)) for k in cols]))
        if len(cols) <= len(FIGURES) or console.width >= 120:
            table = Table(box=None, pad_edge=False, show_edge=False)
            table.add_column("fault", no_wrap=True)
            table.add_column("target", overflow="fold")
            for col in cols:  # figures keep their width and header; only the target column folds
                table.add_column(col, justify="right", no_wrap=True)
            for label, target, values in rows:
                table.add_row(label, escape(target[:60]), *values)
            console.print(table)
        else:  # seven figures and a target do not fit a narrow terminal: one block per fault
            for label, target, values in rows:
                console.print(f"{escape(label)}  [dim]{escape(target)}[/]")
                console.print("  " + "  ".join(f"{k} {v}" for k, v in zip(cols, values)))
        for f in o.faults:  # where each fault really landed: the trigger's jitter, beside the figures
            landing = describe_landing(f.label, f.recovery) if f.injected else None
            if landing:
                console.print(f"[dim]{escape(landing)}[/]")
    for line, line_style in check_lines(report):
        word, rest = line.split(" ", 1)
        console.print(f"  [{line_style}]{word}[/] {escape(rest)}")
    console.print(f"  [dim]{report.run_dir}/journal.json[/]")
