"""``chaos report RUN_DIR``: an HTML and a Markdown report and a timeline PNG of a finished run; ``chaos report runs/``: an index of many."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chaos.errors import ExperimentError
from chaos.evidence.events import History
from chaos.evidence.outcome import look
from chaos.evidence.recovery import describe_landing
from chaos.gameday.summary import summarize
from chaos.report.baseline import by_experiment, compare, load_baseline, markdown_summary
from chaos.report.html import render_html
from chaos.report.journal import FILE, Journal, read_journals
from chaos.report.terminal import recovery_columns
from chaos.report.timeline import plot_timeline
from chaos.spec.load import load_experiment


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write report.html, report.md and timeline.png for a finished run, or index.md "
                                      "for a folder of runs")
    p.add_argument("run_dir", metavar="RUN_DIR", help="one run's folder, or a folder of runs (e.g. runs/)")
    p.add_argument("--baseline", metavar="FILE", help="for a folder of runs: show each figure's change against this baseline")
    p.set_defaults(func=run)


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def render_markdown(journal: Journal) -> str:
    lines = [f"# {journal.experiment}: {journal.word}", "", journal.description, "",
             f"- wall time: {journal.wall_s:.1f} s; workload exit {journal.workload_exit_code}"
             f"{' (timed out)' if journal.timed_out else ''}",
             f"- attempts: {', '.join(journal.attempts) or 'none'}; max step {journal.max_step}", ""]
    for d in journal.diagnostics:
        lines.append(f"> **{d}**")
    if journal.faults:
        cols = recovery_columns([f.recovery for f in journal.faults])
        lines += ["", "## Faults", "", "| fault | details | " + " | ".join(cols) + " |",
                  "|---|---|" + "---|" * len(cols)]
        for f in journal.faults:
            details = f.error or json.dumps({k: v for k, v in f.details.items() if k != "max_step_before"}, default=str)
            lines.append(f"| {f.label} | `{details}` | " + " | ".join(_fmt(f.recovery.get(c)) for c in cols) + " |")
        landings = [text for f in journal.faults if (text := describe_landing(f.label, f.recovery))]
        if landings:
            lines += [""] + [f"- {text}" for text in landings]
    lines += ["", "## Checks", "", "| check | verdict | reason |", "|---|---|---|"]
    for c in journal.checks:
        lines.append(f"| {c.kind} | {look(c.verdict).label} | {c.reason} |")
    if journal.commands:
        lines += ["", "## Commands the harness ran", "", "```"] + journal.commands + ["```"]
    lines += ["", "![timeline](timeline.png)", ""]
    return "\n".join(lines)


def render_index(journals: list[Journal], baseline: dict | None = None) -> str:
    """One page for many runs: experiments x checks, the recovery figures, and links to each run's report."""
    # Fault-free reference runs judge nothing themselves: listing them as PASS would claim a proof.
    references = [j for j in journals if j.is_reference]
    journals = [j for j in journals if not j.is_reference]
    kinds = sorted({c.kind for j in journals for c in j.checks})
    lines = [f"# Chaos suite: {len(journals)} run(s) (+{len(references)} fault-free reference run(s))", "",
             f"{sum(j.exit_code == 0 for j in journals)} passed, "
             f"{sum(j.exit_code != 0 for j in journals)} did not.", "",
             "| experiment | verdict | " + " | ".join(kinds) + " | worst resume_s | wall_s | run |",
             "|---|---|" + "---|" * len(kinds) + "---|---|---|"]
    for j in sorted(journals, key=lambda j: (j.experiment, j.started)):
        verdicts = {c.kind: look(c.verdict).label for c in j.checks}
        resume = [f.recovery["resume_s"] for f in j.faults if f.recovery.get("resume_s") is not None]
        link = f"[report]({j.folder.name}/report.md)"
        lines.append(f"| {j.experiment} | {j.word} | " + " | ".join(verdicts.get(k, "") for k in kinds)
                     + f" | {_fmt(max(resume) if resume else None)} | {_fmt(j.wall_s)} | {link} |")
    if baseline is not None:
        groups = sorted(by_experiment(journals).items())
        comparisons = [c for name, js in groups if (c := compare(name, js, baseline)) is not None]
        lines += ["", "## Against the baseline", "", markdown_summary(comparisons)]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    if not (run_dir / FILE).exists() and run_dir.is_dir() and any(run_dir.glob(f"*/{FILE}")):
        return _run_index(run_dir, args.baseline)
    journal = Journal.read(run_dir)
    plot_timeline(History.from_run_dir(run_dir), journal, run_dir / "timeline.png")
    (run_dir / "report.md").write_text(render_markdown(journal))
    write_html(journal, run_dir)
    print(f"wrote {run_dir / 'report.html'}, {run_dir / 'report.md'} and {run_dir / 'timeline.png'}")
    return 0


def write_html(journal: Journal, run_dir: Path) -> Path:
    """report.html; a journal written before goodput was recorded gets its figures computed now."""
    if journal.goodput is None:
        try:
            experiment = load_experiment(journal.source) if journal.source else None
        except ExperimentError:
            experiment = None  # the file moved or changed shape: the split needs no plan
        journal = journal.model_copy(update=summarize(History.from_run_dir(run_dir), journal.faults, experiment))
    path = run_dir / "report.html"
    path.write_text(render_html(journal, run_dir))
    return path


def _run_index(runs: Path, baseline_path: str | None) -> int:
    journals = read_journals([runs])
    for j in journals:
        try:
            plot_timeline(History.from_run_dir(j.folder), j, j.folder / "timeline.png")
        except Exception as exc:  # one unplottable run must not cost the index: say so and go on
            print(f"{j.folder}: no timeline ({type(exc).__name__}: {exc})")
        (j.folder / "report.md").write_text(render_markdown(j))
    baseline = load_baseline(baseline_path) if baseline_path else None
    (runs / "index.md").write_text(render_index(journals, baseline))
    print(f"wrote {runs / 'index.md'} ({len(journals)} runs, each with report.md and timeline.png)")
    return 0
