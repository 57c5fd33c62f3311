"""torchft drop-replica recovery: the survivor's pause, the rejoin and the heal, per lighthouse heartbeat timeout.

    python ci/bench/torchft_recovery.py [--heartbeats 2000 5000] [--reps 3]

Runs experiments/torchft-kill-replica.yaml (replica group 1's process SIGKILLed at step 20; torchrun
brings it back) with each lighthouse ``heartbeat_timeout_ms`` and takes, per setting, the medians of
what the checks measured: the survivor's longest stall (survivor_progress), the time from the kill to
the rejoined process being up and from then to its heal (replicas_converge), and the share of
(group, step)s lost (drop_replica_samples). The baseline is the heartbeat timeout itself: the pause
should track it (the lighthouse keeps a dead group in the quorum that long), and the rest should not.
One table, each setting side by side.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

from chaos.run.runner import Runner
from chaos.spec.load import load_experiment

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments" / "torchft-kill-replica.yaml"


def run_once(heartbeat_ms: int, root: Path) -> dict[str, Any]:
    text, n = re.subn(r"heartbeat_timeout_ms: [0-9]+", f"heartbeat_timeout_ms: {heartbeat_ms}", EXPERIMENT.read_text())
    # The stall bound follows the setting: the pause is measured here, not gated.
    text, m = re.subn(r"max_stall_s: [0-9.]+", f"max_stall_s: {heartbeat_ms / 1000 + 5:g}", text)
    if (n, m) != (1, 1):
        raise SystemExit(f"{EXPERIMENT} no longer has one heartbeat_timeout_ms and one max_stall_s to vary")
    path = root / f"torchft-{heartbeat_ms}.yaml"
    path.write_text(text.replace("workloads/torchft_ddp.py", str(REPO / "workloads" / "torchft_ddp.py")))
    report = Runner(load_experiment(path), runs_root=root / "runs").run()
    by_kind = {c.kind: c for c in report.checks}
    bad = [f"{c.kind} {c.verdict}: {c.reason}" for c in report.checks if c.verdict != "pass"]
    if bad:
        raise SystemExit(f"heartbeat {heartbeat_ms} ms: " + "; ".join(bad))
    survivor = next(iter(by_kind["survivor_progress"].figures.values()))
    rejoin = next(iter(by_kind["replicas_converge"].figures["rejoins"].values()))
    return {"pause_s": survivor["max_stall_s"], "up_s": rejoin["up_s"], "heal_s": rejoin["heal_s"],
            "lost": by_kind["drop_replica_samples"].figures["lost_fraction"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heartbeats", type=int, nargs="+", default=[2000, 5000])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for hb in args.heartbeats:
            samples = [run_once(hb, Path(d)) for _ in range(args.reps)]
            rows[hb] = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    print(f"{'heartbeat timeout':<18} {'pause_s':>8} {'pause - hb':>11} {'up_s':>7} {'heal_s':>7} {'lost':>7}"
          f"   (median of {args.reps})")
    for hb, r in rows.items():
        print(f"{hb / 1000:>15.1f} s  {r['pause_s']:>8.2f} {r['pause_s'] - hb / 1000:>+11.2f} {r['up_s']:>7.2f} "
              f"{r['heal_s']:>7.2f} {r['lost']:>7.1%}")


if __name__ == "__main__":
    main()
