"""The terminal summary a person reads in five seconds: verdict, faults with recovery figures, checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from chaos.runner import RunReport

_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold magenta", "skip": "yellow"}


def _fmt(value: object) -> str:
    return "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))


def print_report(report: "RunReport", console: Console | None = None) -> None:
    console = console or Console(stderr=False, highlight=False)
    o = report.outcome
    verdict = {0: "PASS", 1: "FAIL", 2: "INVALID", 3: "ERROR"}.get(report.exit_code, "ERROR")
    style = {"PASS": "bold green", "FAIL": "bold red"}.get(verdict, "bold magenta")
    attempts = o.history.attempts()
    console.print(
        f"[{style}]{verdict}[/] {o.experiment.name}  "
        f"{o.wall_s:.1f}s, workload exit {_fmt(o.exit_code)}{' (timed out)' if o.timed_out else ''}, "
        f"{len(attempts)} attempt(s), max step {o.history.max_step()}")
    for line in o.diagnostics:
        console.print(f"  [bold yellow]![/] {line}")
    if o.faults:
        table = Table(box=None, pad_edge=False, show_edge=False)
        for col in ("fault", "target", "detect_s", "restart_s", "resume_s", "regain_s", "lost_steps"):
            table.add_column(col, justify="left" if col in ("fault", "target") else "right")
        for f in o.faults:
            r = f.recovery
            target = f.error or ", ".join(f"{k}={v}" for k, v in f.details.items()
                                         if k in ("ranks", "signal", "path", "mode", "node", "nodes", "code"))
            table.add_row(f.label, target[:60], *(_fmt(r.get(k)) for k in
                                                   ("detect_s", "restart_s", "resume_s", "regain_s", "lost_steps")))
        console.print(table)
    for c in report.checks:
        console.print(f"  [{_STYLE.get(c.verdict, '')}]{c.verdict.upper():5}[/] {c.kind}: {c.reason}")
    console.print(f"  [dim]{report.run_dir}/journal.json[/]")
