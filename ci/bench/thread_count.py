"""Benchmark: experiments whose nodes share this host, with one intra-op thread per rank vs torch's default.

torchrun sets OMP_NUM_THREADS=1 for its workers when a node runs several of them, and leaves it alone
for one worker per node. A multi-node target co-locates its nodes on one host (a world-size change,
Slurm's throwaway cluster, netns), so each node's single worker gets torch's default of one thread
per core, and on a 2-core box running several jobs those threads spin for each other. scripts/test.sh
exports OMP_NUM_THREADS=1 for that reason; this measures what it saves.

Each trial runs the same experiment with ``chaos run`` twice, once with OMP_NUM_THREADS=1 and once
without it, alternating which goes first. A private golden cache is warmed for each setting before
the trials (the thread count is part of the golden key), so no trial times a golden run. Per run:
CPU seconds of the harness and everything it started (this process's reaped children) and wall
seconds. Medians over the trials with the spread (min-max), and the ratio one thread / default.
The reference DDP workload fixes its own thread count (trainkit/dist.py), so kill-node-elastic is
the control: its ratio should be ~1.

    python ci/bench/thread_count.py [--trials 3] [--experiments hf-trainer-world-size-change ...]
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns  # noqa: E402

EXPERIMENTS = ("hf-trainer-world-size-change", "lightning-world-size-change-reshard", "kill-node-elastic")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name: str, one_thread: bool, cache: Path, runs: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``chaos run`` of experiments/<name>.yaml."""
    env = dict(os.environ, CHAOS_CACHE_DIR=str(cache))
    env.pop("OMP_NUM_THREADS", None)
    env.pop("MKL_NUM_THREADS", None)
    if one_thread:
        env["OMP_NUM_THREADS"] = "1"
    argv = [sys.executable, "-m", "chaos", "run", str(ROOT / "experiments" / f"{name}.yaml"), "--runs-dir", str(runs)]
    cpu0, t0 = children_cpu(), time.monotonic()
    done = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    # 1 is a verdict (a known-failure experiment fails its checks by design); anything else is not a run.
    if done.returncode not in (0, 1):
        raise SystemExit(f"{name} (one thread: {one_thread}) exited {done.returncode}:\n{done.stdout[-3000:]}")
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS))
    a = ap.parse_args()
    for name in a.experiments:
        if not (ROOT / "experiments" / f"{name}.yaml").is_file():
            raise SystemExit(f"no experiments/{name}.yaml: name one of {sorted(p.stem for p in (ROOT / 'experiments').glob('*.yaml'))}")
    console = Console(width=max(120, Console().width))
    table = Table(title=f"one intra-op thread per rank vs torch's default: medians of {a.trials} trials (min-max)")
    for col in ("experiment", "CPU-s 1 thread", "CPU-s default", "ratio", "wall s 1 thread", "wall s default", "ratio"):
        table.add_column(col, justify="left" if col == "experiment" else "right", no_wrap=col == "experiment")
    with tempfile.TemporaryDirectory() as tmp:
        cache, runs_dir = Path(tmp) / "cache", Path(tmp) / "runs"
        for name in a.experiments:
            for one in (True, False):
                run(name, one, cache, runs_dir)  # warms the golden for this setting; not timed
            runs = alternate(a.trials, lambda one: run(name, one, cache, runs_dir))
            table.add_row(name, *columns(runs, digits=1))
            console.print(f"{name}: done", style="dim")
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
