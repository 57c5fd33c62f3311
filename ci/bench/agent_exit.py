"""Benchmark: the harness's torchrun (chaos/runtime/torchrun.py) vs ``python -m torch.distributed.run``.

Each trial starts the same job under both agents: 2 workers that do not import torch and end at
once, so the job's CPU is the agent's own (torch's import, rendezvous, monitoring, its exit) and
its wall time is the agent's start plus its end. Which goes first alternates. Medians over the
trials, with the spread (min-max), and the ratio lean / stock. The suite starts about two hundred
agents (ci/bench/suite_accounting.py counts them).

    python ci/bench/agent_exit.py [--trials 7]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns  # noqa: E402

MODULES = {True: "chaos.runtime.torchrun", False: "torch.distributed.run"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def trial(lean: bool, worker: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one job."""
    argv = [sys.executable, "-m", MODULES[lean], "--standalone", "--nproc-per-node", "2",
            "--monitor-interval", "0.1", str(worker)]
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{MODULES[lean]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        worker = Path(tmp) / "worker.py"
        worker.write_text("pass\n")
        runs = alternate(a.trials, lambda lean: trial(lean, worker))
    table = Table(title=f"torchrun agent, lean vs stock: medians of {a.trials} trials (min-max)")
    for col in ("job", "CPU-s lean", "CPU-s stock", "ratio", "wall s lean", "wall s stock", "ratio"):
        table.add_column(col, justify="left" if col == "job" else "right")
    table.add_row("2 workers, no torch", *columns(runs))
    Console(width=max(120, Console().width)).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
