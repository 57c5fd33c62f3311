"""``chaos run EXPERIMENT...``: run experiments, print a summary, exit 0 pass / 1 check failed / 2 invalid / 3 harness error."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from rich.console import Console

from chaos.commands.validate import experiment_files
from chaos.errors import ChaosError, ExperimentError
from chaos.experiment import load_experiment
from chaos.golden import Golden
from chaos.report import print_report
from chaos.runner import Runner


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run experiments (files or folders)")
    p.add_argument("paths", nargs="+", metavar="EXPERIMENT", help="experiment files or folders of them")
    p.add_argument("--runs-dir", default="runs", help="where run directories are created (default: ./runs)")
    p.add_argument("--dry-run", action="store_true",
                   help="print every action with the exact commands it would run, and run none")
    p.add_argument("--junit", metavar="PATH", help="also write a combined JUnit XML report here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    files = experiment_files(args.paths)
    # Validate everything first: a typo in the last file should not cost the first file's run.
    experiments = []
    problems = []
    for path in files:
        try:
            experiments.append(load_experiment(path))
        except ExperimentError as exc:
            problems.extend(exc.problems)
    if problems:
        for p in problems:
            print(str(p), file=sys.stderr)
        return 2
    runs_root = Path(args.runs_dir)
    if args.dry_run:
        for exp in experiments:
            console.print(f"[bold]{exp.name}[/] (dry run: nothing is executed)")
            for line in Runner(exp, runs_root=runs_root, dry_run=True).plan():
                console.print(f"  {line}")
        return 0
    worst = 0
    reports = []
    for exp in experiments:
        console.print(f"[dim]running {exp.name} ({exp.source}) ...[/]")
        try:
            report = Runner(exp, runs_root=runs_root, golden=Golden(exp, runs_root),
                            echo=lambda m: console.print(f"  [dim]{m}[/]")).run()
        except ChaosError as exc:
            console.print(f"[bold magenta]ERROR[/] {exp.name}: {exc}")
            worst = max(worst, exc.exit_code)
            continue
        print_report(report, console)
        reports.append(report)
        worst = max(worst, report.exit_code)
    if len(experiments) > 1:
        passed = sum(r.exit_code == 0 for r in reports)
        console.print(f"\n[bold]{passed} of {len(experiments)} experiments passed[/]")
    if args.junit:
        _combine_junit([r.run_dir / "junit.xml" for r in reports], Path(args.junit))
    return worst


def _combine_junit(parts: list[Path], dest: Path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    for part in parts:
        for suite in ET.parse(part).getroot():
            root.append(suite)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if len(parts) == 1:
        shutil.copyfile(parts[0], dest)
    else:
        ET.ElementTree(root).write(dest, encoding="utf-8", xml_declaration=True)
