"""Benchmark: the project's own modules compiled to bytecode (scripts/setup.sh runs compileall) vs left as source.

An editable install compiles nothing, and where PYTHONDONTWRITEBYTECODE is set (these machines set it) no import
writes a .pyc, so without compileall every process compiles what it imports of chaos/ and workloads/ again: each
rank (chaos.sdk, trainkit), each ``chaos`` command. Each trial copies chaos/ and workloads/ into two folders, one
compiled and one not (PYTHONDONTWRITEBYTECODE=1 for both, so neither writes any), and in each measures:

- CPU seconds of a short job under torchrun (2 ranks of workloads/ddp.py on CPU, gloo; the agent and both ranks);
- CPU seconds of ``chaos run <experiment> --dry-run`` (the harness's own start-up: the spec, every plugin).

Which goes first alternates; medians over the trials with the spread (min-max), and the ratio compiled / source.

    python ci/bench/bytecode.py [--trials 5]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree(base: Path, compiled: bool, parts: tuple[str, ...] = ("chaos", "workloads", "experiments")) -> Path:
    """A copy of ``parts`` of the checkout under ``base``, its modules compiled or with no bytecode at all."""
    for part in parts:
        shutil.copytree(ROOT / part, base / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if compiled:
            compileall.compile_dir(str(base / part), quiet=1)
    return base


def cpu_of(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    before = children_cpu()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return children_cpu() - before


def trial(trees: dict[bool, Path], compiled: bool, steps: int) -> tuple[float, float]:
    base = trees[compiled]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(base), CHAOS_RUN_DIR=tmp,
                   CHAOS_EVENTS_DIR=str(Path(tmp) / "events"), CHAOS_CKPT_DIR=str(Path(tmp) / "ckpt"))
        job = cpu_of([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                      "--monitor-interval", "0.1", str(base / "workloads" / "ddp.py"), "--steps", str(steps),
                      "--ckpt-every", str(steps)], env, base)
        cli = cpu_of([sys.executable, "-m", "chaos", "run", "experiments/rank-kill-ddp.yaml", "--dry-run",
                      "--runs-dir", tmp], env, base)
    return job, cli


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="steps of the job")
    a = ap.parse_args()
    console = Console(width=max(120, Console().width))
    with tempfile.TemporaryDirectory() as tmp:
        trees = {c: tree(Path(tmp) / ("compiled" if c else "source"), c) for c in (True, False)}
        runs = alternate(a.trials, lambda compiled: trial(trees, compiled, a.steps))
    table = Table(title=f"chaos/ and workloads/ compiled vs source: medians of {a.trials} trials (min-max)")
    for col in ("CPU-s job compiled", "CPU-s job source", "ratio", "CPU-s CLI compiled", "CPU-s CLI source", "ratio"):
        table.add_column(col, justify="right")
    table.add_row(*columns(runs))
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
