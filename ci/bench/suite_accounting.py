"""Where a test run's CPU went, by kind of process, from Linux process accounting.

The junit figures (suite_cpu.py) see the CPU of each test's own process tree; process accounting
sees every process that ended while it was on, the Slurm daemons' and containers' children and
orphaned ranks included, and answers what the suite's CPU is made of: torchrun agents, ranks,
DataLoader workers, the harness and pytest, the rest. As root, with the ``acct`` package
(``apt-get install acct``)::

    touch /tmp/pacct && accton /tmp/pacct
    bash scripts/test.sh --junitxml=/tmp/suite.xml
    accton off
    python ci/bench/suite_accounting.py /tmp/pacct

A process is classed by its command name and its parent's, as the kernel recorded them at its exit:
torch's elastic agent names itself ``pt_elastic`` and its DataLoader workers ``pt_data_worker``; a
rank is a Python child of an agent; the harness (a pytest worker running experiments in-process, or
``chaos run``) is a Python process with an agent child. Records are written at exit, so a process
still running when accounting stopped is not counted.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

TICKS_PER_S = 100.0
"""dump-acct prints user, system and elapsed time in clock ticks (AHZ, 100 per second on Linux)."""


@dataclass(frozen=True)
class Proc:
    comm: str
    cpu_s: float
    elapsed_s: float
    pid: int
    ppid: int


def parse(text: str) -> list[Proc]:
    """dump-acct's lines (``comm|v3|utime|stime|etime|uid|gid|mem|io|pid|ppid|...``); other lines are skipped."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 11:
            continue
        try:
            out.append(Proc(f[0].rstrip("*"), (float(f[2]) + float(f[3])) / TICKS_PER_S, float(f[4]) / TICKS_PER_S,
                            int(f[9]), int(f[10])))
        except ValueError:
            continue
    return out


def _python(comm: str) -> bool:
    return comm.startswith("python")


def classify(procs: list[Proc]) -> dict[str, list[Proc]]:
    """Each process under one kind (see the module docstring)."""
    by_pid = {p.pid: p for p in procs}
    children: dict[int, list[Proc]] = defaultdict(list)
    for p in procs:
        children[p.ppid].append(p)
    kinds: dict[str, list[Proc]] = defaultdict(list)
    for p in procs:
        parent = by_pid.get(p.ppid)
        if p.comm.startswith("pt_elastic"):
            kind = "torchrun agents"
        elif p.comm.startswith("pt_data_worker"):
            kind = "DataLoader workers"
        elif _python(p.comm) and parent is not None and parent.comm.startswith("pt_elastic"):
            kind = "ranks"
        elif _python(p.comm) and any(c.comm.startswith("pt_elastic") for c in children[p.pid]):
            kind = "harness and pytest workers"
        elif _python(p.comm):
            kind = "other Python"
        else:
            kind = p.comm
        kinds[kind].append(p)
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pacct", type=Path, help="the accounting file accton wrote")
    ap.add_argument("--top", type=int, default=8, help="other commands listed by name")
    a = ap.parse_args()
    dump = shutil.which("dump-acct")
    if dump is None:
        raise SystemExit("dump-acct not found: install the acct package (apt-get install acct)")
    if not a.pacct.is_file():
        raise SystemExit(f"{a.pacct}: no such accounting file (touch it, then accton {a.pacct}, before the run)")
    done = subprocess.run([dump, str(a.pacct)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"dump-acct {a.pacct} failed: {done.stderr.strip()}")
    procs = parse(done.stdout)
    if not procs:
        raise SystemExit(f"{a.pacct} holds no process records: was accounting on during the run?")
    total = sum(p.cpu_s for p in procs)
    kinds = classify(procs)
    named = ["ranks", "torchrun agents", "harness and pytest workers", "other Python", "DataLoader workers"]
    rest = sorted((k for k in kinds if k not in named), key=lambda k: -sum(p.cpu_s for p in kinds[k]))
    table = Table(title=f"CPU by kind of process: {total:,.0f} CPU-s in {len(procs):,} processes")
    for col in ("kind", "processes", "CPU-s", "share", "median CPU-s each"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind in [k for k in named if k in kinds] + rest[:a.top]:
        members = kinds[kind]
        cpu = sum(p.cpu_s for p in members)
        table.add_row(kind, f"{len(members):,}", f"{cpu:,.1f}", f"{cpu / total:.1%}" if total else "-",
                      f"{statistics.median(p.cpu_s for p in members):.2f}")
    others = rest[a.top:]
    if others:
        cpu = sum(p.cpu_s for k in others for p in kinds[k])
        table.add_row(f"{len(others)} other commands", f"{sum(len(kinds[k]) for k in others):,}", f"{cpu:,.1f}",
                      f"{cpu / total:.1%}" if total else "-", "")
    Console(width=max(100, Console().width)).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
