"""Benchmark: recovery through Slurm's requeue vs torchrun's in-job restart, on the local Slurm cluster.

Both sides run the same 2-node DDP job (experiments/slurm-rank-kill-ddp.yaml's workload, target
and trigger step) and lose their ranks at the same step:

- in-job: ``kill-rank`` SIGKILLs rank 1; torchrun restarts the ranks inside the allocation;
- requeue: ``requeue`` (scontrol requeue) kills every rank through Slurm; the job is held for the
  cluster's requeue delay (cred_expire, 5 s on the local cluster, 120 s by default), scheduled
  again and runs a new batch script.

Per trial it reports resume_s (fault -> first step of the next attempt) for both, and for the
requeue side requeue_s (fault -> scontrol shows the job RUNNING again) and its share of
resume_s. Trials alternate which side goes first. Needs root, slurm-wlm and munge (bash
scripts/setup.sh as root).

    python ci/bench/requeue_latency.py [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from chaos.spec.load import load_experiment  # noqa: E402
from chaos.run.runner import Runner  # noqa: E402

IN_JOB = ROOT / "experiments" / "slurm-rank-kill-ddp.yaml"
REQUEUE = ROOT / "experiments" / "slurm-requeue-ddp.yaml"


def trial(path: Path, runs: Path) -> dict[str, float | None]:
    exp = load_experiment(path)
    exp.checks = []  # figures only: no golden run, no checks
    report = Runner(exp, runs_root=runs, golden=None).run()
    [fault] = report.outcome.faults
    rec = fault.recovery
    if fault.error or rec.get("resume_s") is None:
        raise RuntimeError(f"{exp.name} did not resume ({fault.error or 'no resume_s'}): {report.run_dir}")
    return {"resume_s": rec["resume_s"], "requeue_s": rec.get("requeue_s"), "share": rec.get("requeue_share")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the local Slurm cluster's namespaces and daemons): sudo -E python ci/bench/requeue_latency.py",
              file=sys.stderr)
        return 2
    step = {load_experiment(p).faults[0].trigger.raw["at_step"]["at_step"] for p in (IN_JOB, REQUEUE)}
    if len(step) != 1:
        raise SystemExit(f"the two experiments must fault at the same step, not {sorted(step)}")
    in_job: list[dict] = []
    requeue: list[dict] = []
    with tempfile.TemporaryDirectory() as runs:
        for i in range(args.trials):
            sides = [lambda: in_job.append(trial(IN_JOB, Path(runs))), lambda: requeue.append(trial(REQUEUE, Path(runs)))]
            if i % 2:  # alternate which side goes first, so a drift of the machine favours neither
                sides.reverse()
            for side in sides:
                side()
            print(f"trial {i + 1}: in-job resume {in_job[-1]['resume_s']:.2f} s; requeue resume "
                  f"{requeue[-1]['resume_s']:.2f} s (requeue_s {requeue[-1]['requeue_s']})", file=sys.stderr)

    def col(xs: list[dict], key: str) -> list[float]:
        return [float(x[key]) for x in xs if x[key] is not None]

    rows = [("in-job restart (torchrun)", "resume_s", col(in_job, "resume_s")),
            ("Slurm requeue", "resume_s", col(requeue, "resume_s")),
            ("Slurm requeue", "requeue_s", col(requeue, "requeue_s")),
            ("Slurm requeue", "requeue_share", col(requeue, "share"))]
    print(f"{'path':<27} {'figure':<14} {'median':>8} {'min':>8} {'max':>8}  (n={args.trials}, step {step.pop()})")
    for name, fig, xs in rows:
        if xs:
            print(f"{name:<27} {fig:<14} {statistics.median(xs):>8.2f} {min(xs):>8.2f} {max(xs):>8.2f}")
    ratio = statistics.median(col(requeue, "resume_s")) / statistics.median(col(in_job, "resume_s"))
    print(f"ratio requeue/in-job resume_s (medians): {ratio:.2f}")
    print(json.dumps({"in_job": in_job, "requeue": requeue}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
