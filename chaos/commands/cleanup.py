"""``chaos cleanup [RUN_DIR...]``: undo whatever a killed harness left behind, from the runs' ledgers."""

from __future__ import annotations

import argparse
from pathlib import Path

from chaos.errors import UsageError
from chaos.runtime.ledger import LEDGER_NAME, Ledger, unfinished_runs
from chaos.runtime.safety import find_leftovers, stop_run_processes
from chaos.runtime.shell import Shell


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cleanup", help="revert what a killed run left (no argument: every unfinished run)")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR")
    p.add_argument("--dry-run", action="store_true", help="print the undo commands, run none")
    p.add_argument("--force", action="store_true",
                   help="also clean a run whose harness is still alive (it may be running right now)")
    p.set_defaults(func=run)


def _run_dirs(raw: list[str]) -> list[Path]:
    dirs = []
    for d in raw:
        try:
            p = Path(d)
            is_run = (p / LEDGER_NAME).is_file()
        except (OSError, ValueError):
            is_run = False
        if not is_run:
            raise UsageError(f"{d!r} is not a run directory (no {LEDGER_NAME}); pass a runs/<name>-<time> folder, "
                             f"or no argument to clean every unfinished run")
        dirs.append(p)
    return dirs


def run(args: argparse.Namespace) -> int:
    explicit = bool(args.run_dirs)
    dirs = _run_dirs(args.run_dirs) if explicit else unfinished_runs()
    if not dirs:
        print("nothing to clean up: no unfinished runs")
        return 0
    problems = 0
    for d in dirs:
        ledger = Ledger(d)
        if ledger.harness_alive() and not args.force:
            # Another harness (a parallel pytest worker, a colleague's run) is working on it right now.
            print(f"{d}: skipped, its harness (pid {ledger.owner_pid}) is still running; stop it first "
                  f"(it reverts on SIGINT/SIGTERM) or pass --force")
            problems += explicit
            continue
        for line in ledger.unreadable:
            print(f"  UNREADABLE ledger record, left alone: {line}")
        pending = ledger.pending()
        print(f"{d}: {len(pending)} action(s) to undo" if pending else f"{d}: nothing left to undo in the ledger")
        for entry in pending:
            print(f"  [{entry.owner}] {entry.undo.describe()}")
        if args.dry_run:
            continue
        shell = Shell()
        for f in ledger.revert(shell):
            print(f"  FAILED [{f.owner}] {f.action}: {f.error}")
            problems += 1
        # Workers re-parented away from the launcher the ledger knows (torchrun gives them their own session).
        for pid in stop_run_processes(d):
            print(f"  stopped pid {pid} (carried CHAOS_RUN_DIR={d})")
        left = find_leftovers(d, shell)
        for item in left:
            print(f"  STILL PRESENT ({item.kind}) {item.what}")
        problems += len(left)
        ledger.close()
        if not left and ledger.closed:
            print(f"{d}: clean")
    return 1 if problems else 0
