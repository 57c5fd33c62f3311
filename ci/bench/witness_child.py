"""Benchmark: the checkpoint witness's child shared by a harness process's runs vs one child per run.

Each trial plays ``--runs`` runs one after another, each asking the witness for one look at a real DCP
checkpoint (its ``.metadata`` is a pickle of torch's classes: the child imports torch to read it), once
with the child kept between runs (chaos/evidence/witness.py) and once ended after each run (as before,
a child per run). Which goes first alternates. Per setting: the children's CPU seconds (reaped) and
the wall seconds from a run's first request to its last answer, summed over the runs. Medians over
the trials, with the spread (min-max), and the ratio shared / per run.

    python ci/bench/witness_child.py [--trials 5] [--runs 4]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns  # noqa: E402

from chaos.evidence import witness  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def trial(shared: bool, ckpt: Path, runs: int) -> tuple[float, float]:
    cpu0, wall = children_cpu(), 0.0
    for n in range(runs):
        logged: list[dict] = []
        w = witness.CheckpointWitness(lambda ev, **f: logged.append(f))
        t0 = time.perf_counter()
        w.observe([{"ev": "ckpt_commit", "path": str(ckpt), "step": n, "attempt": "0.0", "t": 0.0}])
        w.close()
        wall += time.perf_counter() - t0
        if not logged or logged[0].get("ok") is not True:
            raise SystemExit(f"the look failed: {logged}")
        if not shared:
            witness.shutdown()
    witness.shutdown()
    return children_cpu() - cpu0, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--runs", type=int, default=4)
    a = ap.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        import torch.distributed.checkpoint as dcp

        ckpt = Path(tmp) / "step_000010"
        dcp.save({"w": torch.randn(256, 256)}, checkpoint_id=str(ckpt), no_dist=True)
        runs = alternate(a.trials, lambda shared: trial(shared, ckpt, a.runs))
    table = Table(title=f"witness child shared vs per run, {a.runs} runs per trial: medians of {a.trials} (min-max)")
    for col in ("looks", "CPU-s shared", "CPU-s per run", "ratio", "wall s shared", "wall s per run", "ratio"):
        table.add_column(col, justify="left" if col == "looks" else "right")
    table.add_row(f"{a.runs} runs x 1 DCP look", *columns(runs))
    Console(width=max(120, Console().width)).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
