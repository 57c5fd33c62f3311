"""Benchmark: resume_s of the reference DDP workload after SIGKILL of rank 1, under the harness vs bare torchrun.

Both sides run the same workload and the same kill (rank 1 at step --kill-at). The bare side is
torchrun alone, with a minimal watcher that tails the event files to time the kill and the first
step of the restarted attempt; the harness side is ``chaos run`` machinery (Runner) with the
experiment experiments/rank-kill-ddp.yaml. Trials alternate, and which side goes first alternates
too. The harness must not slow recovery: goal ratio (harness / bare) <= 1.02.

It also reports the harness's own share of the CPU in its runs: the harness process's CPU time
(the Runner runs in this process; measured around each harness trial) over that plus its children's
(torchrun, every rank, the checkpoint witness). Goal: under 5 %.

    python ci/bench/resume_overhead.py [--trials 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from chaos.evidence.events import EventTail  # noqa: E402
from chaos.spec.load import load_experiment  # noqa: E402
from chaos.runtime.launch import script_args  # noqa: E402
from chaos.run.runner import Runner  # noqa: E402

EXPERIMENT = ROOT / "experiments" / "rank-kill-ddp.yaml"


def bare_trial(kill_at: int) -> float:
    exp = load_experiment(EXPERIMENT)
    w = exp.workload
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events"
        env = dict(os.environ, CHAOS_EVENTS_DIR=str(events), CHAOS_CKPT_DIR=str(Path(tmp) / "ckpt"),
                   CHAOS_RUN_DIR=tmp, PYTHONPATH=str(ROOT))
        if not w.share_rdzv_store:  # the same rendezvous setting the harness launches with
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(w.nproc_per_node), "--max-restarts", str(w.max_restarts),
                "--monitor-interval", "0.1", str(exp.resolve_script()), *script_args(w.args)]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        tail = EventTail(events)
        pid1 = None
        t_kill = None
        resumed = None
        deadline = time.monotonic() + 240
        try:
            while time.monotonic() < deadline and resumed is None:
                for r in tail.poll():
                    if r["ev"] == "start" and r["rank"] == 1 and r["attempt"] == "0.0":
                        pid1 = r["pid"]
                    if t_kill is None and r["ev"] == "step" and r["step"] >= kill_at and pid1:
                        os.kill(pid1, signal.SIGKILL)
                        t_kill = time.time()
                    if t_kill is not None and r["ev"] == "step" and r["attempt"] != "0.0":
                        resumed = r["t"] - t_kill
                        break
                time.sleep(0.05)  # the same poll period as the harness
            proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if resumed is None:
            raise RuntimeError("bare torchrun did not resume after the kill")
        return resumed


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def harness_trial(runs: Path) -> tuple[float, float]:
    """resume_s of one harness run, and the harness's share of the run's CPU."""
    exp = load_experiment(EXPERIMENT)
    exp.checks = []
    self0, kids0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    report = Runner(exp, runs_root=runs).run()
    own, kids = _cpu(resource.RUSAGE_SELF) - self0, _cpu(resource.RUSAGE_CHILDREN) - kids0
    value = report.outcome.faults[0].recovery.get("resume_s")
    if value is None:
        raise RuntimeError(f"harness run did not resume: {report.run_dir}")
    return float(value), own / (own + kids)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    args = ap.parse_args()
    kill_at = load_experiment(EXPERIMENT).faults[0].trigger.raw["at_step"]["at_step"]
    bare, harness, share = [], [], []
    with tempfile.TemporaryDirectory() as runs:
        for i in range(args.trials):
            def run_harness() -> None:
                value, cpu_share = harness_trial(Path(runs))
                harness.append(value)
                share.append(cpu_share)
            sides = [lambda: bare.append(bare_trial(kill_at)), run_harness]
            if i % 2:  # alternate which side goes first, so a drift of the machine favours neither
                sides.reverse()
            for side in sides:
                side()
            print(f"trial {i + 1}: bare {bare[-1]:.2f} s, harness {harness[-1]:.2f} s, "
                  f"harness CPU share {share[-1]:.1%}", file=sys.stderr)
    mb, mh = statistics.median(bare), statistics.median(harness)
    slower = sum(h > b for b, h in zip(bare, harness))
    print(f"{'side':<9} {'median resume_s':>16} {'min':>7} {'max':>7}")
    for name, xs in (("bare", bare), ("harness", harness)):
        print(f"{name:<9} {statistics.median(xs):>16.2f} {min(xs):>7.2f} {max(xs):>7.2f}")
    print(f"ratio harness/bare: {mh / mb:.3f} (goal <= 1.02), harness slower in {slower} of {args.trials} trials")
    print(f"harness CPU share of its runs: median {statistics.median(share):.1%} "
          f"({min(share):.1%}..{max(share):.1%}; goal < 5 %)")
    print(json.dumps({"bare": bare, "harness": harness, "harness_cpu_share": share}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
