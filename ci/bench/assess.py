"""Benchmark: how long ``chaos assess`` takes, and what the golden cache saves it.

Two figures, side by side in one run:

1. The observation (``chaos assess --plan-only``: one fault-free run, read and planned) with an empty golden cache
   against the same with this workload's golden run already cached (a second assessment of the same job, or one
   after the suite's experiments of the same workload): trials alternate, and which goes first alternates too
   (ci/bench/sidebyside.py). The cached side reads the cached run instead of starting the job.
2. One whole assessment (observation, every experiment of the battery, the card), its wall time against the plan's
   own estimate, and each experiment's run time.

    python ci/bench/assess.py [--trials 3] [--only rank-kill,nan] [--script workloads/ddp.py]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci" / "bench"))

from sidebyside import alternate, columns  # noqa: E402

ARGS = ["--arg", "steps=60", "--arg", "ckpt_every=10", "--arg", "seed=0"]


def assess(script: str, out: Path, cache: Path, *extra: str) -> float:
    env = {**os.environ, "CHAOS_CACHE_DIR": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "chaos", "assess", "--out", str(out), script, *ARGS, *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1) or not (out / ("card.json" if "--plan-only" not in extra else "observe.yaml")).exists():
        sys.exit(f"chaos assess failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--script", default="workloads/ddp.py")
    ap.add_argument("--only", default="", help="the battery's probes for the whole assessment (default: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-bench-assess-") as tmp:
        base = Path(tmp)
        warm_cache = base / "warm-cache"
        assess(args.script, base / "prime", warm_cache, "--plan-only")  # the cached side's golden run
        count = iter(range(10 ** 6))

        def observe(cached: bool) -> list[float]:
            n = next(count)
            cache = warm_cache if cached else base / f"cold-cache-{n}"
            return [assess(args.script, base / f"observe-{n}", cache, "--plan-only")]

        runs = alternate(args.trials, observe)
        print(f"| figure ({args.trials} trials, median (min-max)) | golden cached | cold | ratio |")
        print("|---|---|---|---|")
        print("| observe and plan, wall s | " + " | ".join(columns(runs)) + " |")

        out = base / "whole"
        extra = ("--only", args.only) if args.only else ()
        wall = assess(args.script, out, warm_cache, *extra)
        card = json.loads((out / "card.json").read_text())
        estimate = sum(p["estimate_s"] for p in card["plan"] if p["skip"] is None)
        print()
        print("| whole assessment | wall s |")
        print("|---|---|")
        print(f"| chaos assess {args.script} (golden cached) | {wall:.1f} |")
        print(f"| the plan's estimate | {estimate:.1f} (ratio wall/estimate {wall / estimate:.2f}) |")
        for row in card["rows"]:
            if not row["run_dir"]:
                continue
            journal = json.loads((Path(row["run_dir"]) / "journal.json").read_text())
            print(f"| {row['probe']}: {row['survived']} | {journal['wall_s']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
