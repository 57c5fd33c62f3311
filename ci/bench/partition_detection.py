"""Partition -> detection time with the workload's short collective timeout, vs the default timeout (extrapolated).

    python ci/bench/partition_detection.py [--timeouts 5 10] [--reps 2]

Runs the partition-node-ddp experiment (netns, needs root) with each pg_timeout_s, takes the median
detect_s per timeout, fits detect_s = overhead + slope * timeout, and extrapolates to gloo's default
(1800 s) and NCCL's (600 s) instead of waiting 30 minutes. One table, baseline side by side.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path

from chaos.spec.load import load_experiment
from chaos.run.runner import Runner

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "partition-node-ddp.yaml"
DEFAULTS = {"gloo default": 1800.0, "nccl default": 600.0}


def detect_once(timeout_s: float, runs_root: Path) -> float | None:
    text, n_timeout = re.subn(r"pg_timeout_s: [0-9.]+", f"pg_timeout_s: {timeout_s:g}", EXPERIMENT.read_text())
    # Keep the link cut until well after the timeout (and the ranks' exit), so detection is the
    # timeout's doing and lands before the release, as the detection check requires.
    text, n_duration = re.subn(r"duration_s: [0-9.]+", f"duration_s: {timeout_s + 10:g}", text)
    if (n_timeout, n_duration) != (1, 1):
        raise SystemExit(f"{EXPERIMENT} no longer has one pg_timeout_s and one duration_s to vary")
    path = runs_root / f"partition-{timeout_s:g}.yaml"
    path.write_text(text.replace("workloads/ddp.py", str(EXPERIMENT.parents[1] / "workloads" / "ddp.py")))
    exp = load_experiment(path)
    exp.checks = []  # only the figure matters here
    report = Runner(exp, runs_root=runs_root / "runs").run()
    faults = report.outcome.faults
    return faults[0].recovery.get("detect_s") if faults else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeouts", type=float, nargs="+", default=[5.0, 10.0])
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    medians: dict[float, float] = {}
    with tempfile.TemporaryDirectory() as d:
        for t in args.timeouts:
            samples = [s for s in (detect_once(t, Path(d)) for _ in range(args.reps)) if s is not None]
            if not samples:
                raise SystemExit(f"the partition was never detected with pg_timeout_s={t:g}")
            medians[t] = statistics.median(samples)
    xs = sorted(medians)
    if len(xs) >= 2:
        slope = (medians[xs[-1]] - medians[xs[0]]) / (xs[-1] - xs[0])
        overhead = medians[xs[0]] - slope * xs[0]
    else:
        slope, overhead = 1.0, medians[xs[0]] - xs[0]
    print(f"{'collective timeout':<22} {'detect_s':>10} {'vs shortest':>12}   (median of {args.reps}; fit: "
          f"{overhead:.2f} s + {slope:.2f} x timeout)")
    best = medians[xs[0]]
    for t in xs:
        print(f"{f'pg_timeout_s={t:g}':<22} {medians[t]:>10.2f} {medians[t] / best:>11.1f}x   measured")
    for name, t in DEFAULTS.items():
        est = overhead + slope * t
        print(f"{f'{name} ({t:g} s)':<22} {est:>10.0f} {est / best:>11.0f}x   extrapolated")


if __name__ == "__main__":
    main()
