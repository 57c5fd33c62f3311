"""``chaos validate PATH...``: check experiment files and report every problem with file, line, path and fix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.errors import ExperimentError, UsageError
from chaos.experiment import load_experiment


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="validate experiment files (exit 2 on any problem)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="experiment files or folders of them")
    p.set_defaults(func=run)


def experiment_files(paths: list[str]) -> list[Path]:
    """Expand folders to the YAML files they hold; a missing path is a usage error."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        try:
            if p.is_dir():
                out.extend(sorted(list(p.glob("*.yaml")) + list(p.glob("*.yml"))))
                continue
            found = p.exists()
        except (OSError, ValueError) as exc:  # a NUL byte, a name too long: say so, not a traceback
            raise UsageError(f"not a usable path: {raw[:200]!r} ({exc.__class__.__name__})") from None
        if not found:
            raise UsageError(f"no such file or folder: {raw}")
        out.append(p)
    if not out:
        raise UsageError(f"no experiment files (*.yaml) in {', '.join(paths)}")
    return out


def run(args: argparse.Namespace) -> int:
    bad = 0
    files = experiment_files(args.paths)
    for path in files:
        try:
            load_experiment(path)
            print(f"ok  {path}")
        except ExperimentError as exc:
            bad += 1
            for problem in exc.problems:
                print(str(problem), file=sys.stderr)
    if bad:
        print(f"{bad} of {len(files)} experiment file(s) invalid", file=sys.stderr)
        return 2
    return 0
