"""How fast this host is right now, for the baseline gate.

A shared 2-core runner does not run at one speed: the same box measured ``import torch`` at 1.7
CPU-s in a morning and 2.0-2.8 in the afternoon (the project's own suite records that figure:
tests/suite_telemetry.py). The same drift moves a run's timing figures (restart_s, resume_s,
badput_s: mostly interpreter and torch start-up), and a loaded runner moves them more: a baseline
made in a fast hour then fails an unchanged script in a slow one (issue 39). ``probe_s`` is the gate's unit of host speed: a fixed
piece of work (interpreted loop, page faults, hashing: what start-up and a tiny model's steps are
made of) run by several processes at once, timed by the wall clock, so it sees a slower CPU and a
CPU shared with another job alike. It runs in the harness's own interpreter with no site packages,
so the code under test cannot make it slower. Each run logs it before launch and after the
workload is gone (``host_speed`` in harness.jsonl, ``host_speed`` in journal.json); chaos.report.baseline
compares timing figures at the baseline's speed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

PROBE_PROCS = 2
"""Processes the probe runs at once (at most the host's CPUs): a 2-rank job's share of the box."""
_PROBE = """
import hashlib, time
t = time.perf_counter()
x = 0
for i in range(300000):
    x += i * i
b = bytearray(16 << 20)
for j in range(0, len(b), 4096):
    b[j] = 1
hashlib.sha256(bytes(4 << 20)).digest()
print(time.perf_counter() - t)
"""


def probe_s(procs: int = PROBE_PROCS, python: str = sys.executable) -> float | None:
    """Median wall seconds of the fixed probe work over ``procs`` processes run together (about 0.05 s on
    an idle core); None when it cannot run. Higher is slower."""
    n = max(1, min(procs, os.cpu_count() or 1))
    try:
        children = [subprocess.Popen([python, "-I", "-S", "-c", _PROBE], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True) for _ in range(n)]
    except OSError:
        return None
    samples = []
    for child in children:
        try:
            out, _ = child.communicate(timeout=60)
            samples.append(float(out.strip()))
        except (subprocess.TimeoutExpired, ValueError):
            child.kill()
            child.wait()
    if len(samples) != n:
        return None
    return round(statistics.median(samples), 4)
