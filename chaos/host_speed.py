"""How fast this host is right now, in the unit the suite's CPU is spent in: one ``import torch``.

A shared 2-core runner does not run at one speed: the same box measured ``import torch`` at 1.7
CPU-s in a morning and 2.0-2.8 in the afternoon, and every test's CPU moved with it (the suite's
2,128 against 1,782 CPU-s on the same code). A suite time means something next to another only
with the speed it ran at, so the pytest plugin measures this at the start of a run that writes
junit XML, and ci/bench/suite_cpu.py prints it with the totals.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys


def _children_cpu_s() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def import_torch_cpu_s(trials: int = 3, python: str = sys.executable) -> float | None:
    """Median CPU seconds (user + system) of a fresh ``python -c "import torch"``; None when it fails."""
    samples = []
    for _ in range(trials):
        before = _children_cpu_s()
        done = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120)
        if done.returncode != 0:
            return None
        samples.append(_children_cpu_s() - before)
    return round(statistics.median(samples), 2)
