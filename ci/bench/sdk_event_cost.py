"""Benchmark: what one chaos.sdk step event costs, next to a plain buffered file write of the same line.

Comparing whole training-step times with events on and off swung from -5 % to +9 % run to run at a
1.4 ms step on a shared 2-core VM: the effect (microseconds) drowns in the noise (milliseconds).
This measures the per-event cost itself, side by side in one process, in interleaved rounds:

- ``sdk.step``: the real writer (serialise, one unbuffered ``write()`` per line, so a SIGKILL loses
  nothing already reported), with the reference workload's record (4 samples a rank);
- ``buffered``: the same line serialised the same way, written to a Python buffered file (the
  cheapest way to log, which a SIGKILL can lose);
- ``serialise only``: building the line without writing it.

It then states the share of a training step the event costs, for the step times given
(``--step-ms``), from the median per-event cost. Goal (issue 13): a realistic step pays < 1 %.
The loop runs with warm caches; right after a real step (caches full of tensors) an event was
seen to cost up to ~20 us, still 0.04 % of a 50 ms step.

    python ci/bench/sdk_event_cost.py [--events 20000] [--rounds 7] [--samples 4] [--step-ms 1.4 10 50 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from chaos import sdk  # noqa: E402


def _per_event_us(fn, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n * 1e6


def measure(n: int, rounds: int, samples: int, tmp: Path) -> dict[str, list[float]]:
    writer = sdk.EventWriter(str(tmp / "events"), host="bench")
    batch = list(range(samples))
    ident = {"pid": os.getpid(), "host": "bench", "rank": 0, "world_size": 2, "attempt": "0.0"}

    def record(i: int) -> dict:
        return {"ev": "step", "t": time.time(), "mono": time.monotonic(), **ident,
                "step": i, "epoch": 0, "samples": batch, "loss": 0.5}

    sides: dict[str, list[float]] = {"sdk.step": [], "buffered": [], "serialise only": []}
    with open(tmp / "buffered.jsonl", "wb") as buffered:
        cases = {
            "sdk.step": lambda i: writer.emit("step", step=i, epoch=0, samples=batch, loss=0.5),
            "buffered": lambda i: buffered.write(sdk._dumps(record(i))),
            "serialise only": lambda i: sdk._dumps(record(i)),
        }
        for fn in cases.values():  # warm up: first open, caches, orjson
            _per_event_us(fn, 1000)
        for r in range(rounds):
            # Rotate the order every round so no side always runs right after the same neighbour.
            names = list(cases)
            names = names[r % len(names):] + names[:r % len(names)]
            for name in names:
                sides[name].append(_per_event_us(cases[name], n))
    return sides


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20000, help="events per side per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--samples", type=int, default=4, help="dataset indices in each step record")
    ap.add_argument("--step-ms", type=float, nargs="+", default=[1.4, 10.0, 50.0, 300.0],
                    help="training step times to state the event's share of")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-bench-") as tmp:
        sides = measure(args.events, args.rounds, args.samples, Path(tmp))
    print(f"per-event cost, {args.rounds} rounds x {args.events} events, {args.samples} samples a record "
          f"(orjson: {'yes' if sdk._orjson is not None else 'no'})")
    print(f"{'side':<16}{'median us':>11}{'min us':>9}{'max us':>9}{'vs buffered':>13}")
    base = statistics.median(sides["buffered"])
    for name, values in sides.items():
        med = statistics.median(values)
        print(f"{name:<16}{med:>11.2f}{min(values):>9.2f}{max(values):>9.2f}{med / base:>12.2f}x")
    cost = statistics.median(sides["sdk.step"])
    print()
    print(f"{'step ms':>8}{'event share':>13}{'goal < 1 %':>12}")
    for step_ms in args.step_ms:
        share = cost / (step_ms * 1000) * 100
        print(f"{step_ms:>8g}{share:>12.3f}%{'met' if share < 1 else 'NOT met':>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
