"""``chaos validate PATH...``: check experiment files and report every problem with file, line, path and fix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.errors import ExperimentError, UsageError
from chaos.spec.experiment import Experiment
from chaos.spec.load import load_experiment


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


RESUME_CHECKS = "checkpoint_integrity: {} or recovery_time: {metric: lost_steps, max: 0}"


def resume_unjudged(exp: Experiment) -> str | None:
    """Why an experiment that restarts the job judges no resume, or None.

    One that exists to restart the job (``completes`` with ``min_restarts``) promises a resume, and
    a stack that retrains from step 0 after the fault passes completes, exactly_once, matches_golden
    and replicas_agree alike. Only checkpoint_integrity (a load older than the newest commit) and
    recovery_time on lost_steps (steps lost beyond the newest durable checkpoint) fail it."""
    restarts = [c for c in exp.checks if c.kind == "completes" and getattr(c.config, "min_restarts", 0) >= 1]
    if not restarts or exp.known_failure is not None:
        return None
    for c in exp.checks:
        if c.kind == "checkpoint_integrity" or (c.kind == "recovery_time"
                                                and getattr(c.config, "metric", None) == "lost_steps"):
            return None
    return (f"it restarts the job (completes: min_restarts {restarts[0].config.min_restarts}) but no check fails a "
            f"restart from scratch (a stack that ignores its checkpoints passes every check listed): add "
            f"{RESUME_CHECKS}")


def run(args: argparse.Namespace) -> int:
    bad = 0
    files = experiment_files(args.paths)
    for path in files:
        try:
            exp = load_experiment(path)
            print(f"ok  {path}")
            warning = resume_unjudged(exp)
            if warning:
                print(f"    warning: {warning}")
        except ExperimentError as exc:
            bad += 1
            for problem in exc.problems:
                print(str(problem), file=sys.stderr)
    if bad:
        print(f"{bad} of {len(files)} experiment file(s) invalid", file=sys.stderr)
        return 2
    return 0
