"""Benchmark: a reference workload's start-up with the garbage collector paused (trainkit/startup.py) vs on.

Each trial starts the same short job twice under torchrun (2 ranks on CPU, gloo): once as the
workloads start (the collector paused from before ``import torch`` until the model is wrapped) and
once with ``TRAINKIT_GC_PAUSE=0`` (the collector on throughout, as in a script that does not
pause it). Which goes first alternates. Per job it measures:

- CPU seconds of the whole job (torchrun's agent and both ranks: this process's reaped children);
- seconds from launching torchrun to the first training step of any rank (the job's start-up,
  what a restart waits for before it trains again).

Medians over the trials, with the spread (min-max), and the ratio paused / on. A short job: the
start-up is most of it, as it is of every restart.

    python ci/bench/startup_gc.py [--trials 5] [--workloads ddp fsdp hf_trainer ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chaos.evidence.events import read_records

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns, spread  # noqa: E402,F401 (spread: the tests read it here)

WORKLOADS = ("ddp", "fsdp", "hf_trainer", "lightning_ddp", "accelerate_loop", "stateful_loader")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_step_t(events: Path) -> float | None:
    """When the first rank reported its first step: the earliest ``step`` record of the job's event files."""
    times = [r["t"] for r in read_records([events]) if r.get("ev") == "step" and isinstance(r.get("t"), (int, float))]
    return min(times) if times else None


def trial(workload: str, paused: bool, steps: int) -> tuple[float, float]:
    """(CPU seconds, seconds to the first step) of one job."""
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events"
        env = dict(os.environ, CHAOS_EVENTS_DIR=str(events), CHAOS_CKPT_DIR=str(Path(tmp) / "ckpt"),
                   CHAOS_RUN_DIR=tmp, PYTHONPATH=str(ROOT), TRAINKIT_GC_PAUSE="1" if paused else "0")
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                "--monitor-interval", "0.1", str(ROOT / "workloads" / f"{workload}.py"),
                "--steps", str(steps), "--ckpt-every", str(steps)]
        cpu0, launched = children_cpu(), time.time()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=300)
        cpu = children_cpu() - cpu0
        if done.returncode != 0:
            raise SystemExit(f"{workload} (paused={paused}) exited {done.returncode}:\n{done.stderr[-3000:]}")
        first = first_step_t(events)
        if first is None:
            raise SystemExit(f"{workload} (paused={paused}) reported no step: nothing to time its start-up by")
        return cpu, first - launched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="steps per job")
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    a = ap.parse_args()
    console = Console(width=max(120, Console().width))
    table = Table(title=f"start-up with the collector paused vs on: medians of {a.trials} trials (min-max)")
    for col in ("workload", "CPU-s paused", "CPU-s on", "ratio", "1st step s paused", "1st step s on", "ratio"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for workload in a.workloads:
        runs = alternate(a.trials, lambda paused: trial(workload, paused, a.steps))
        table.add_row(workload, *columns(runs))
        console.print(f"{workload}: done", style="dim")
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
