"""Benchmark: step time of the reference DDP training loop with chaos events on vs off.

Each trial is a fresh process running the real trainkit loop (one gloo rank, no sleeps, no
checkpoints) for --steps steps and timing ``Trainer.train()``; trials alternate on/off so drift
hits both sides alike. Prints the median step time of each side and the overhead. Goal: <= 1 %.

    python ci/bench/sdk_overhead.py [--trials 7] [--steps 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TRIAL = r"""
import os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "workloads"))
from trainkit.config import TrainConfig
from trainkit.dist import init_distributed, destroy_distributed
from trainkit.trainer import Trainer
steps = int(sys.argv[2])
cfg = TrainConfig(steps=steps, step_sleep=0.0, ckpt_every=0, log_every=0, ckpt_dir=sys.argv[3])
t = Trainer(cfg)
t.env = init_distributed(60)
t.setup()
t0 = time.perf_counter()
t.train()
dt = time.perf_counter() - t0
destroy_distributed()
print(dt / steps)
"""


def trial(events: bool, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("CHAOS_EVENTS_DIR", None)
        if events:
            env["CHAOS_EVENTS_DIR"] = os.path.join(tmp, "events")
        env["PYTHONPATH"] = str(ROOT)
        out = subprocess.run([sys.executable, "-c", TRIAL, str(ROOT), str(steps), os.path.join(tmp, "ckpt")],
                             env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    off, on = [], []
    for _ in range(args.trials):
        off.append(trial(False, args.steps))
        on.append(trial(True, args.steps))
    m_off, m_on = statistics.median(off), statistics.median(on)
    overhead = (m_on - m_off) / m_off * 100
    print(f"{'events':<8} {'median step (ms)':>17} {'min (ms)':>9} {'max (ms)':>9}")
    for name, xs in (("off", off), ("on", on)):
        print(f"{name:<8} {statistics.median(xs) * 1e3:>17.4f} {min(xs) * 1e3:>9.4f} {max(xs) * 1e3:>9.4f}")
    print(f"overhead: {overhead:+.2f} % of step time ({(m_on - m_off) * 1e6:+.1f} us per step), "
          f"{args.trials} trials x {args.steps} steps; goal <= 1 %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
