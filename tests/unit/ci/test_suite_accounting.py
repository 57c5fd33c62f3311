"""ci/bench/suite_accounting.py: dump-acct's ticks become seconds, and each process is classed by its tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("suite_accounting", ROOT / "ci" / "bench" / "suite_accounting.py")
suite_accounting = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = suite_accounting  # its dataclass looks its module up there
spec.loader.exec_module(suite_accounting)

# comm|version|utime|stime|etime|uid|gid|mem|io|pid|ppid|flags|exitcode|tty|btime, as dump-acct prints it
DUMP = """\
python          |v3|   300.00|    20.00|  60000.00|     0|     0| 1.00| 1.00|   100|     1|     |       0|__      |Wed
pt_elastic      |v3|   140.00|    10.00|  2000.00|     0|     0| 1.00| 1.00|   200|   100|     |       0|__      |Wed
python          |v3|   200.00|    30.00|  1900.00|     0|     0| 1.00| 1.00|   201|   200|     |       0|__      |Wed
python*         |v3|   180.00|    20.00|  1900.00|     0|     0| 1.00| 1.00|   202|   200|     |       0|__      |Wed
pt_data_worker* |v3|     1.00|     0.00|   100.00|     0|     0| 1.00| 1.00|   203|   201|     |       0|__      |Wed
python          |v3|    25.00|     5.00|    40.00|     0|     0| 1.00| 1.00|   300|   100|     |       0|__      |Wed
scontrol        |v3|     0.00|     1.00|     2.00|     0|     0| 1.00| 1.00|   301|   100|     |       0|__      |Wed
not a record line
"""


def test_ticks_are_hundredths_of_a_second_and_the_kill_mark_is_dropped() -> None:
    procs = suite_accounting.parse(DUMP)
    assert len(procs) == 7
    harness = procs[0]
    assert (harness.comm, harness.cpu_s, harness.elapsed_s, harness.pid, harness.ppid) == ("python", 3.2, 600.0, 100, 1)
    assert procs[3].comm == "python" and procs[4].comm == "pt_data_worker"


def test_each_process_is_classed_by_its_name_and_its_parent() -> None:
    kinds = suite_accounting.classify(suite_accounting.parse(DUMP))
    pids = {kind: sorted(p.pid for p in members) for kind, members in kinds.items()}
    assert pids == {"harness and pytest workers": [100], "torchrun agents": [200], "ranks": [201, 202],
                    "DataLoader workers": [203], "other Python": [300], "scontrol": [301]}
