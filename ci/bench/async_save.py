"""Benchmark: synchronous vs asynchronous checkpoint saves of the reference DDP workload, under the same slow storage.

Each trial runs the same job twice under torchrun (2 ranks on CPU, gloo): once saving synchronously, once with
``--async-save`` (the state staged in memory, written by a background thread). Which goes first alternates. The
checkpoint directory is on real slow storage: the slow-storage fault's FUSE passthrough (chaos.runtime.slowfs)
capping every write together at ``--write-mbps`` (needs root, /dev/fuse and libfuse2, as the fault does); with
``--write-mbps 0``, ``--ckpt-write-delay-s`` holds each save open instead (any machine). From the job's own events
(chaos.evidence.goodput, the split every run's journal carries) it reports, per setting:

- the wall time from launch to the job's exit;
- the time saves blocked training (``ckpt_save`` badput: a synchronous save's whole write, an asynchronous
  save's staging only);
- the staging seconds the asynchronous saves reported (``ckpt_staged``) and the write seconds of all saves
  (``ckpt_commit``): how much of the write overlapped training.

Medians over the trials, with the spread (min-max), and the ratio async / sync.

    python ci/bench/async_save.py [--trials 3] [--steps 40] [--write-mbps 2] [--write-mbps 0 --write-delay-s 1.0]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import alternate, columns  # noqa: E402

from chaos.evidence.events import History, read_records  # noqa: E402
from chaos.evidence.goodput import compute_goodput  # noqa: E402


@contextlib.contextmanager
def slow_storage(folder: Path, write_mbps: float) -> Iterator[None]:
    """``folder`` on the slow filesystem for the block (mounted empty, unmounted after; the fault's own daemon)."""
    if not write_mbps:
        yield
        return
    from chaos.faults.slow_storage import check_can_fuse

    check_can_fuse()
    backing, control = folder.parent / "backing", folder.parent / "control.json"
    backing.mkdir()
    folder.mkdir()
    control.write_text(json.dumps({"write_mbps": write_mbps}))
    daemon = subprocess.Popen([sys.executable, "-m", "chaos.runtime.slowfs", str(backing), str(folder), "--control",
                               str(control)], env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not os.path.ismount(folder):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the slow filesystem did not mount")
            time.sleep(0.02)
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        daemon.kill()
        daemon.wait()


def trial(asynchronous: bool, steps: int, delay_s: float, write_mbps: float) -> tuple[float, float, float, float]:
    """(wall s, s saves blocked training, staging s summed over saves, write s summed over saves) of one job."""
    with tempfile.TemporaryDirectory() as tmp, slow_storage(Path(tmp) / "ckpt", write_mbps):
        events = Path(tmp) / "events"
        env = dict(os.environ, CHAOS_EVENTS_DIR=str(events), CHAOS_RUN_DIR=tmp, PYTHONPATH=str(ROOT),
                   OMP_NUM_THREADS="1")
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                "--monitor-interval", "0.1", str(ROOT / "workloads" / "ddp.py"), "--steps", str(steps),
                "--ckpt-every", "10", "--ckpt-dir", str(Path(tmp) / "ckpt"), "--step-sleep", "0.05",
                *(["--ckpt-write-delay-s", str(delay_s)] if not write_mbps else []),
                *(["--async-save"] if asynchronous else [])]
        t0 = time.time()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=600)
        t1 = time.time()
        if done.returncode != 0:
            raise SystemExit(f"async={asynchronous} exited {done.returncode}:\n{done.stderr[-3000:]}")
        records = [{"ev": "launch", "t": t0, "source": "harness"}, *read_records([events]),
                   {"ev": "exit", "t": t1, "code": 0, "source": "harness"}]
        history = History(records)
        split = compute_goodput(history, [])
        staged = sum(r["seconds"] for r in history.of("ckpt_staged") if r.get("rank") == 0)
        written = sum(r["seconds"] for r in history.of("ckpt_commit") if r.get("rank") == 0)
        return t1 - t0, split.seconds["ckpt_save"], staged, written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40, help="steps per job (a save every 10)")
    ap.add_argument("--write-mbps", type=float, default=2.0,
                    help="the slow filesystem's write bandwidth, MB/s, all ranks together (0: --write-delay-s instead)")
    ap.add_argument("--write-delay-s", type=float, default=1.0, help="with --write-mbps 0: each save held open this long")
    a = ap.parse_args()
    runs = alternate(a.trials, lambda asynchronous: trial(asynchronous, a.steps, a.write_delay_s, a.write_mbps))
    storage = f"storage at {a.write_mbps:g} MB/s (FUSE)" if a.write_mbps else f"writes held {a.write_delay_s:g} s"
    table = Table(title=f"async vs sync saves, {a.steps} steps, {storage}: medians of {a.trials} trials (min-max)")
    for col in ("figure", "async", "sync", "ratio"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    cols = columns(runs)
    for k, name in enumerate(("job wall s", "training blocked by saves s", "staging s (all saves)",
                              "write s (all saves)")):
        table.add_row(name, *cols[3 * k:3 * k + 3])
    Console(width=max(100, Console().width)).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
