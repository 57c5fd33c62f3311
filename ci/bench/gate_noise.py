"""Benchmark: does the baseline gate catch a slowed checkpoint save, and leave unchanged reruns alone?

One run: a baseline of the experiment (``--base-repeat`` runs), then ``--reruns`` runs of the same,
unchanged code, each gated alone against it (the noise a pull request would see), then
``--slowed`` runs with ``ckpt_write_delay_s`` (a save held open for that long), gated as a median.
Prints each gated figure's worst rerun against its bound, and the verdicts. Goal (issue 13): 0 of
the reruns fail the gate; the slowed run does.

    python ci/bench/gate_noise.py [--experiment experiments/rank-kill-ddp.yaml] [--reruns 10] [--delay 1.0]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from chaos.baseline import build_baseline, compare  # noqa: E402
from chaos.experiment import load_experiment  # noqa: E402
from chaos.golden import Golden  # noqa: E402
from chaos.runner import Runner  # noqa: E402


def run_journals(exp, runs: Path, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        report = Runner(exp, runs_root=runs, golden=Golden(exp, runs)).run()
        journal = json.loads((report.run_dir / "journal.json").read_text())
        journal["_path"] = str(report.run_dir)
        out.append(journal)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default=str(ROOT / "experiments" / "rank-kill-ddp.yaml"))
    ap.add_argument("--base-repeat", type=int, default=3)
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--slowed", type=int, default=1)
    ap.add_argument("--delay", type=float, default=1.0, help="ckpt_write_delay_s of the slowed runs")
    args = ap.parse_args()
    exp = load_experiment(args.experiment)
    slowed = copy.copy(exp)
    slowed.workload = exp.workload.model_copy(update={"args": {**exp.workload.args, "ckpt_write_delay_s": args.delay}})
    with tempfile.TemporaryDirectory(prefix="chaos-gate-") as tmp:
        runs = Path(tmp)
        baseline = build_baseline(run_journals(exp, runs, args.base_repeat))
        reruns = [compare(exp.name, [j], baseline) for j in run_journals(exp, runs, args.reruns)]
        slow = compare(exp.name, run_journals(slowed, runs, args.slowed), baseline)
    failed = [c for c in reruns if c.failed]
    print(f"{exp.name}: baseline of {args.base_repeat} run(s); {args.reruns} unchanged rerun(s) gated alone")
    print(f"{'figure':<28}{'baseline':>10}{'bound':>9}{'worst rerun':>13}{'slowed':>9}")
    for change in reruns[0].changes:
        worst = max(c2.now for c in reruns for c2 in c.changes if c2.figure == change.figure)
        slow_now = next((c.now for c in slow.changes if c.figure == change.figure), float("nan"))
        print(f"{change.figure:<28}{change.base:>10.3g}{change.bound:>9.3g}{worst:>13.3g}{slow_now:>9.3g}")
    print(f"\nunchanged reruns that failed the gate: {len(failed)} of {len(reruns)}"
          + "".join(f"\n  {c.regressions[0].describe() if c.regressions else c.missing}" for c in failed))
    caught = [c.figure for c in slow.regressions]
    print(f"slowed save (ckpt_write_delay_s {args.delay:g}): {'FAILED the gate on ' + ', '.join(caught) if caught else 'NOT caught'}")
    return 0 if not failed and caught else 1


if __name__ == "__main__":
    sys.exit(main())
