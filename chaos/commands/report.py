"""``chaos report RUN_DIR``: a Markdown report and a timeline PNG of a finished run (for game days)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chaos.errors import UsageError
from chaos.events import History
from chaos.timeline import plot_timeline


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write report.md and timeline.png for a finished run")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.set_defaults(func=run)


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def render_markdown(journal: dict) -> str:
    verdict = journal.get("verdict") or {0: "PASS", 1: "FAIL", 2: "INVALID", 3: "ERROR"}.get(journal["exit_code"], "ERROR")
    lines = [f"# {journal['experiment']}: {verdict}", "", journal.get("description", ""), "",
             f"- wall time: {journal['wall_s']:.1f} s; workload exit {journal['workload_exit_code']}"
             f"{' (timed out)' if journal['timed_out'] else ''}",
             f"- attempts: {', '.join(journal['attempts']) or 'none'}; max step {journal['max_step']}", ""]
    for d in journal.get("diagnostics", []):
        lines.append(f"> **{d}**")
    if journal["faults"]:
        cols = ["detect_s", "restart_s", "resume_s", "regain_s", "lost_steps"]
        lines += ["", "## Faults", "", "| fault | details | " + " | ".join(cols) + " |",
                  "|---|---|" + "---|" * len(cols)]
        for f in journal["faults"]:
            details = f.get("error") or json.dumps({k: v for k, v in f["details"].items() if k != "max_step_before"})
            lines.append(f"| {f['label']} | `{details}` | " + " | ".join(_fmt(f["recovery"].get(c)) for c in cols) + " |")
    lines += ["", "## Checks", "", "| check | verdict | reason |", "|---|---|---|"]
    for c in journal["checks"]:
        lines.append(f"| {c['kind']} | {c['verdict'].upper()} | {c['reason']} |")
    if journal.get("commands"):
        lines += ["", "## Commands the harness ran", "", "```"] + journal["commands"] + ["```"]
    lines += ["", "![timeline](timeline.png)", ""]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    try:
        journal = json.loads((run_dir / "journal.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{run_dir} has no readable journal.json ({exc}); pass a finished runs/<name>-<time> folder") from None
    plot_timeline(History.from_run_dir(run_dir), journal, run_dir / "timeline.png")
    (run_dir / "report.md").write_text(render_markdown(journal))
    print(f"wrote {run_dir / 'report.md'} and {run_dir / 'timeline.png'}")
    return 0
