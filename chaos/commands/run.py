"""``chaos run EXPERIMENT...``: run experiments, print a summary, exit 0 pass / 1 check failed / 2 invalid / 3 harness error."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from chaos.report.console import make_console
from chaos.report.journal import Journal
from chaos.report.baseline import Comparison, absent, by_experiment, compare, load_baseline, markdown_summary
from chaos.commands.validate import experiment_files
from chaos.errors import ChaosError, ExperimentError, UsageError
from chaos.spec.load import load_experiment
from chaos.run.session import plan_experiment, run_experiment
from chaos.report import metrics
from chaos.report.terminal import print_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run experiments (files or folders)")
    p.add_argument("paths", nargs="+", metavar="EXPERIMENT", help="experiment files or folders of them")
    p.add_argument("--runs-dir", default="runs", help="where run directories are created (default: ./runs)")
    p.add_argument("--dry-run", action="store_true",
                   help="print every action with the exact commands it would run, and run none")
    p.add_argument("--junit", metavar="PATH", help="also write a combined JUnit XML report here")
    p.add_argument("--baseline", metavar="FILE",
                   help="gate on figures: fail when one regresses against this baseline (chaos baseline save)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run each experiment N times; figures are compared as medians (default 1)")
    p.add_argument("--summary-md", metavar="PATH", help="with --baseline: write the comparison as Markdown here")
    p.add_argument("--allow-new", action="store_true",
                   help="with --baseline: accept experiments the baseline has no entry for (their figures are "
                        "not gated) instead of failing the gate")
    metrics.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = make_console()
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
    plans = [str(e.source) for e in experiments if e.gate is not None]
    if plans:
        raise UsageError(f"{', '.join(plans)}: a coverage plan for a health gate (a gate: section), not an "
                         f"experiment; run it with 'chaos coverage {plans[0]}'")
    runs_root = Path(args.runs_dir)
    if args.repeat < 1:
        raise UsageError(f"--repeat must be 1 or more, not {args.repeat}")
    baseline = load_baseline(args.baseline) if args.baseline else None  # a bad file fails before any run
    outputs = metrics.outputs_of(args)  # a bad path or port fails before any run too
    if args.dry_run:
        for exp in experiments:
            console.print(f"[bold]{exp.name}[/] (dry run: nothing is executed)")
            for line in plan_experiment(exp, runs_root):
                console.print(f"  {line}")
        return 0
    outputs.start()
    try:
        return _run_all(experiments, args, runs_root, baseline, outputs, console)
    finally:
        outputs.close()


def _run_all(experiments: list, args: argparse.Namespace, runs_root: Path, baseline: dict | None,
             outputs: metrics.Outputs, console: Console) -> int:
    worst = 0
    reports = []
    for exp in experiments:
        for n in range(args.repeat):
            again = f" (repeat {n + 1} of {args.repeat})" if args.repeat > 1 else ""
            console.print(f"[dim]running {exp.name} ({exp.source}){again} ...[/]")
            try:
                report = run_experiment(exp, runs_root, echo=lambda m: console.print(f"  [dim]{m}[/]"),
                                        on_poll=outputs.poller(exp.name))
            except ChaosError as exc:
                console.print(f"[bold magenta]ERROR[/] {exp.name}: {exc}")
                worst = max(worst, exc.exit_code)
                continue
            print_report(report, console)
            reports.append(report)
            outputs.after_run(report.run_dir, console)
            worst = max(worst, report.exit_code)
    if len(reports) > 1:
        passed = sum(r.exit_code == 0 for r in reports)
        console.print(f"\n[bold]{passed} of {len(reports)} runs passed[/]")
    comparisons = _gate(baseline, args, reports, console) if baseline is not None else []
    if any(c.failed for c in comparisons):
        worst = max(worst, 1)
    if args.junit:
        _combine_junit([r.run_dir / "junit.xml" for r in reports], Path(args.junit), comparisons)
    return worst


def _gate(baseline: dict, args: argparse.Namespace, reports: list, console: Console) -> list[Comparison]:
    """Compare each experiment's runs (medians over --repeat) with the baseline; print and save the verdicts."""
    journals = [Journal.read(r.run_dir) for r in reports]
    comparisons = []
    for name, js in by_experiment(journals).items():
        comparison = compare(name, js, baseline)
        if comparison is None:
            # A renamed experiment must not silently stop being gated: absent fails unless --allow-new.
            comparison = absent(name, allow_new=args.allow_new)
            comparisons.append(comparison)
            style = "yellow" if args.allow_new else "bold red"
            console.print(f"[{style}]NOT IN BASELINE[/] {escape(comparison.absent_message(args.baseline))}")
            continue
        comparisons.append(comparison)
        console.print(f"[dim]{name}: {escape(comparison.speed)}[/]")
        for change in comparison.regressions:
            console.print(f"[bold red]REGRESSED[/] {name}: {change.describe()} "
                          f"(baseline run {comparison.baseline_runs[0]})")
        for figure in comparison.missing:
            console.print(f"[bold red]MISSING[/] {name}: {figure} is in the baseline but this run did not produce it")
        for figure in comparison.stale:
            console.print(f"[yellow]not compared[/] {name}: {figure} (the baseline predates its present meaning and "
                          f"this run could not produce it; re-save the baseline with chaos baseline save)")
        if not comparison.failed:
            console.print(f"[green]no regression[/] {name}: {len(comparison.changes)} figure(s) within bounds")
    if args.summary_md:
        Path(args.summary_md).write_text(markdown_summary(comparisons))
    return comparisons


def _combine_junit(parts: list[Path], dest: Path, comparisons: list[Comparison] = ()) -> None:
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    for part in parts:
        for suite in ET.parse(part).getroot():
            root.append(suite)
    for c in comparisons:
        # One testcase per gated experiment, the figures as properties a CI dashboard can chart.
        suite = ET.SubElement(root, "testsuite", {"name": f"chaos.baseline.{c.experiment}", "tests": "1",
                                                  "failures": str(int(c.failed))})
        case = ET.SubElement(suite, "testcase", {"classname": "chaos.baseline", "name": c.experiment})
        props = ET.SubElement(case, "properties")
        for ch in c.changes:
            # The figure as measured, for a dashboard to chart; beside it, what the gate compared (a timing
            # figure at the baseline's host speed) and the baseline's median at that speed.
            measured = ch.measured if ch.measured is not None else ch.now
            ET.SubElement(props, "property", {"name": ch.figure, "value": f"{measured:g}"})
            if ch.measured is not None:
                ET.SubElement(props, "property", {"name": f"{ch.figure}.at_baseline_speed", "value": f"{ch.now:g}"})
            ET.SubElement(props, "property", {"name": f"{ch.figure}.baseline", "value": f"{ch.base:g}"})
        problems = [ch.describe() for ch in c.regressions] + [f"{f} missing" for f in c.missing]
        if c.absent and not c.allow_new:
            problems.append(c.absent_message())
        if problems:
            ET.SubElement(case, "failure", {"message": "; ".join(problems)})
        elif c.absent:
            ET.SubElement(case, "skipped", {"message": c.absent_message()})
    dest.parent.mkdir(parents=True, exist_ok=True)
    if len(parts) == 1 and not comparisons:
        shutil.copyfile(parts[0], dest)
    else:
        ET.ElementTree(root).write(dest, encoding="utf-8", xml_declaration=True)
