"""``chaos doctor``: what this host can do (root, netns, netem, nftables, tbf, docker, ...) and how to enable the rest."""

from __future__ import annotations

import argparse
import json

from chaos.probes.base import run_probes
from chaos.report.console import make_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check what this host supports (root, netns, netem, nftables, docker, ...)")
    p.add_argument("probes", nargs="*", metavar="PROBE", help="only these probes (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results = run_probes(args.probes or None)
    if args.json:
        print(json.dumps([{"probe": p.name, "ok": r.ok, "detail": r.detail, "fix": r.fix, "used_for": p.summary}
                          for p, r in results], indent=2))
    else:
        console = make_console()
        for p, r in results:
            mark = "[green]ok[/]  " if r.ok else "[red]no[/]  "
            console.print(f"{mark}[bold]{p.name:<9}[/] {r.detail}  [dim]({p.summary})[/]")
            if not r.ok and r.fix:
                console.print(f"             fix: {r.fix}")
    # Missing capabilities are information, not an error: exit 0 unless every probe failed.
    return 0 if any(r.ok for _p, r in results) else 1
