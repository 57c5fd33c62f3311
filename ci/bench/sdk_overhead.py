"""Benchmark: step time of the reference DDP training loop with chaos events on vs off.

One process per model width runs the real trainkit loop (one gloo rank, no sleeps, no
checkpoints) in blocks of --block steps, switching the event writer on and off between blocks,
so both sides share the process, its caches and whatever else the machine is doing at the time
(two processes compared across minutes on a shared 2-core VM differ by more than the effect).
Prints, per width, the median block step time of each side and the overhead. Goal: <= 1 %.

The cost per step is absolute (one unbuffered write() per event, so a SIGKILL loses nothing), so
the relative figure depends on the step: width 64 gives a ~1 ms step, far shorter than any real
training step; 1024 gives ~10 ms.

    python ci/bench/sdk_overhead.py [--blocks 40] [--block 100] [--hidden 64 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TRIAL = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "workloads"))
from chaos import sdk
from trainkit.config import TrainConfig
from trainkit.dist import init_distributed, destroy_distributed
from trainkit.trainer import Trainer
blocks, block, tmp, hidden = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
on_writer, off_writer = sdk.EventWriter(os.path.join(tmp, "events")), sdk.EventWriter(None)
t = Trainer(TrainConfig(steps=0, step_sleep=0.0, ckpt_every=0, log_every=0,
                        ckpt_dir=os.path.join(tmp, "ckpt"), hidden=hidden))
t.env = init_distributed(60)
t.setup()
t.cfg.steps = block  # warm-up block, not timed
t.train()
times = {"on": [], "off": []}
for i in range(blocks):
    side = "on" if i % 2 else "off"
    sdk._writer = on_writer if side == "on" else off_writer
    t.cfg.steps = t.step + block
    t0 = time.perf_counter()
    t.train()
    times[side].append((time.perf_counter() - t0) / block)
destroy_distributed()
print(json.dumps(times))
"""


def measure(blocks: int, block: int, hidden: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "CHAOS_EVENTS_DIR"}
        env["PYTHONPATH"] = str(ROOT)
        out = subprocess.run([sys.executable, "-c", TRIAL, str(ROOT), str(blocks), str(block), tmp, str(hidden)],
                             env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=40, help="blocks per width, alternating off/on")
    ap.add_argument("--block", type=int, default=100, help="steps per block")
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 1024])
    args = ap.parse_args()
    print(f"{'hidden':>6} {'events':<7} {'median step (ms)':>17} {'p10 (ms)':>9} {'p90 (ms)':>9} {'overhead':>9}")
    for hidden in args.hidden:
        times = measure(args.blocks, args.block, hidden)
        m_off, m_on = statistics.median(times["off"]), statistics.median(times["on"])
        for side in ("off", "on"):
            xs = sorted(times[side])
            extra = f"{(m_on - m_off) / m_off * 100:>+8.2f}%" if side == "on" else ""
            print(f"{hidden:>6} {side:<7} {statistics.median(xs) * 1e3:>17.4f} {xs[len(xs) // 10] * 1e3:>9.4f} "
                  f"{xs[len(xs) * 9 // 10] * 1e3:>9.4f} {extra:>9}")
        print(f"{'':>6} events cost {(m_on - m_off) * 1e6:+.1f} us per step")
    print(f"{args.blocks} blocks x {args.block} steps per width, alternating; goal <= 1 %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
