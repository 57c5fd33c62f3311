"""``chaos cleanup [RUN_DIR...]``: undo whatever a killed harness left behind, from the runs' ledgers."""

from __future__ import annotations

import argparse
from pathlib import Path

from chaos.errors import UsageError
from chaos.ledger import LEDGER_NAME, Ledger, unfinished_runs
from chaos.shell import Shell


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cleanup", help="revert what a killed run left (no argument: every unfinished run)")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR")
    p.add_argument("--dry-run", action="store_true", help="print the undo commands, run none")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dirs = [Path(d) for d in args.run_dirs] or unfinished_runs()
    for d in dirs:
        if not (d / LEDGER_NAME).exists():
            raise UsageError(f"{d} is not a run directory (no {LEDGER_NAME}); pass a runs/<name>-<time> folder")
    if not dirs:
        print("nothing to clean up: no unfinished runs")
        return 0
    failed = 0
    for d in dirs:
        ledger = Ledger(d)
        pending = ledger.pending()
        if not pending:
            print(f"{d}: nothing left to undo")
            if not args.dry_run:
                ledger.close()
            continue
        print(f"{d}: {len(pending)} action(s) to undo")
        for entry in pending:
            print(f"  [{entry.owner}] {entry.undo.describe()}")
        if args.dry_run:
            continue
        failures = ledger.revert(Shell())
        for f in failures:
            print(f"  FAILED [{f.owner}] {f.action}: {f.error}")
        failed += len(failures)
        ledger.close()
    return 1 if failed else 0
