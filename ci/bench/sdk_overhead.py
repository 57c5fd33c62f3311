"""Benchmark: step time of the reference DDP training loop with chaos events on vs off.

Each trial is a fresh process running the real trainkit loop (one gloo rank, no sleeps, no
checkpoints) for --steps steps and timing ``Trainer.train()``; trials alternate on/off so drift
hits both sides alike. Prints, per model width, the median step time of each side and the
overhead. Goal: <= 1 %. The cost per step is absolute (one unbuffered write() per event, so a
SIGKILL loses nothing), so the relative figure depends on how long a step takes: the default
width 64 gives a ~1 ms step, far shorter than any real training step; 1024 gives a few ms.

    python ci/bench/sdk_overhead.py [--trials 7] [--steps 2000] [--hidden 64 1024]
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
cfg = TrainConfig(steps=steps, step_sleep=0.0, ckpt_every=0, log_every=0, ckpt_dir=sys.argv[3],
                  hidden=int(sys.argv[4]))
t = Trainer(cfg)
t.env = init_distributed(60)
t.setup()
t0 = time.perf_counter()
t.train()
dt = time.perf_counter() - t0
destroy_distributed()
print(dt / steps)
"""


def trial(events: bool, steps: int, hidden: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("CHAOS_EVENTS_DIR", None)
        if events:
            env["CHAOS_EVENTS_DIR"] = os.path.join(tmp, "events")
        env["PYTHONPATH"] = str(ROOT)
        out = subprocess.run([sys.executable, "-c", TRIAL, str(ROOT), str(steps), os.path.join(tmp, "ckpt"),
                              str(hidden)],
                             env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 1024])
    args = ap.parse_args()
    print(f"{'hidden':>6} {'events':<7} {'median step (ms)':>17} {'min (ms)':>9} {'max (ms)':>9} {'overhead':>9}")
    for hidden in args.hidden:
        off, on = [], []
        for _ in range(args.trials):
            off.append(trial(False, args.steps, hidden))
            on.append(trial(True, args.steps, hidden))
        m_off, m_on = statistics.median(off), statistics.median(on)
        for name, xs in (("off", off), ("on", on)):
            extra = f"{(m_on - m_off) / m_off * 100:>+8.2f}%" if name == "on" else ""
            print(f"{hidden:>6} {name:<7} {statistics.median(xs) * 1e3:>17.4f} {min(xs) * 1e3:>9.4f} "
                  f"{max(xs) * 1e3:>9.4f} {extra:>9}")
        print(f"{'':>6} events cost {(m_on - m_off) * 1e6:+.1f} us per step")
    print(f"{args.trials} trials x {args.steps} steps per side; goal <= 1 %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
