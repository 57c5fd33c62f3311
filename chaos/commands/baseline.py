"""``chaos baseline save RUNS... -o FILE``: keep the figures of passing runs as the baseline later runs are gated against."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chaos.report.baseline import build_baseline
from chaos.report.journal import read_journals
from chaos.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="save the figures of passing runs as a baseline (chaos run --baseline)")
    inner = p.add_subparsers(dest="baseline_command", metavar="ACTION")
    save = inner.add_parser("save", help="write a baseline from run directories or folders of runs")
    save.add_argument("runs", nargs="+", metavar="RUN", help="run directories, or folders of them (e.g. runs/)")
    save.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the baseline JSON")
    save.set_defaults(func=run_save)
    p.set_defaults(func=lambda _args: p.print_help() or 2)


def run_save(args: argparse.Namespace) -> int:
    baseline = build_baseline(read_journals(args.runs))
    out = Path(args.output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(baseline, indent=1))
        tmp.replace(out)  # a half-written baseline must never replace a good one
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {out}: {exc.strerror or exc}; pick a writable path") from None
    for name, entry in sorted(baseline["experiments"].items()):
        print(f"{name}: {len(entry['runs'])} run(s), {len(entry['figures'])} figure(s)")
    print(f"baseline written to {out}")
    return 0
