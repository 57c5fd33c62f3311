"""Where the test suite's CPU goes: per test file (or experiment) and per test, from a junit XML.

    bash scripts/test.sh --junitxml=/tmp/suite.xml
    python ci/bench/suite_cpu.py /tmp/suite.xml [--top 30]

The suite's own telemetry plugin (tests/suite_telemetry.py, loaded by tests/conftest.py) records each test's CPU seconds (its process and every descendant it reaped:
torchrun, the ranks, a golden run) as the junit property ``cpu_s``. On a 2-core runner the suite
is CPU-bound, so wall time per test mostly says how crowded the box was; CPU seconds say what
each test costs, and their sum over the cores is the floor of the suite's wall time. Both move
with the host's own speed, which that plugin records at the start of the run (the CPU seconds of one
``import torch``): compare two suites only with it in view.

The last table is the other half: wall minus CPU per test, the seconds a test spent not computing
(sleeps and restart back-offs, Slurm's timers, a wait for another worker's golden run, CPU spent
outside its process tree: dockerd, slurmd; and time ready to run but waiting for a core, since
several workers share two). With ``-n`` workers each taking the next test the
suite's wall is about the tests' summed wall over the workers; the waits are what a faster suite
would replace with events or overlap with other tests' CPU.
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from suite_telemetry import HOST_SPEED_PROPERTY, WORKERS_PROPERTY  # noqa: E402  (the suite's own plugin)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", help="junit XML of a pytest run (--junitxml)")
    ap.add_argument("--top", type=int, default=25, help="rows per table")
    ap.add_argument("--cores", type=int, default=2, help="cores of the runner, for the wall-time floor")
    ap.add_argument("--workers", type=int, default=None,
                    help="pytest-xdist workers of the run (default: what tests/suite_telemetry.py recorded in the XML, else 1)")
    a = ap.parse_args()
    rows = []
    spans: list[tuple[float, float]] = []  # (started, wall) of each test the plugin stamped
    tree = ET.parse(a.junit)
    suite_props = {p.get("name"): p.get("value") for suite in tree.iter("testsuite")
                   for props in suite.findall("properties") for p in props.iter("property")}
    for case in tree.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if "started" in props:
            spans.append((float(props["started"]), float(case.get("time") or 0)))
        if "cpu_s" not in props:
            continue
        rows.append((case.get("classname") or "", case.get("name") or "", float(case.get("time") or 0),
                     float(props["cpu_s"])))
    if not rows:
        print(f"{a.junit}: no test carries a cpu_s property (run the project's tests: tests/conftest.py loads tests/suite_telemetry.py)")
        return 1
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for cls, _name, wall, cpu in rows:
        f = by_file[cls]
        f[0] += 1
        f[1] += wall
        f[2] += cpu
    total = sum(r[3] for r in rows)
    console = Console()
    speed = suite_props.get(HOST_SPEED_PROPERTY)
    if a.workers is None:
        recorded = suite_props.get(WORKERS_PROPERTY)
        a.workers = int(recorded) if recorded and recorded.isdigit() else 1
    console.print(f"host speed at the start: import torch took {speed} CPU-s" if speed is not None else
                  "host speed not recorded (a run before the plugin measured it): compare with care")
    files = Table(title=f"CPU by file: {total:.0f} CPU-s in {len(rows)} tests; floor on {a.cores} cores "
                        f"{total / a.cores / 60:.1f} min")
    for col in ("file", "tests", "wall s", "CPU s", "share"):
        files.add_column(col, justify="left" if col == "file" else "right")
    for cls, (n, wall, cpu) in sorted(by_file.items(), key=lambda kv: -kv[1][2])[:a.top]:
        files.add_row(cls, str(n), f"{wall:.1f}", f"{cpu:.1f}", f"{cpu / total:.1%}")
    console.print(files)
    tests = Table(title="CPU by test")
    for col in ("test", "wall s", "CPU s"):
        tests.add_column(col, justify="left" if col == "test" else "right")
    for cls, name, wall, cpu in sorted(rows, key=lambda r: -r[3])[:a.top]:
        tests.add_row(f"{cls.rsplit('.', 1)[-1]}::{name}", f"{wall:.1f}", f"{cpu:.1f}")
    console.print(tests)
    walls = sum(r[2] for r in rows)
    console.print(f"waits: {walls - total:.0f} of {walls:.0f} s of summed test wall; summed wall / {a.workers} "
                  f"workers = {walls / a.workers / 60:.1f} min", soft_wrap=True)
    waits = Table(title="Waits by test (wall - CPU)")
    for col in ("test", "wall s", "CPU s", "wait s"):
        waits.add_column(col, justify="left" if col == "test" else "right")
    for cls, name, wall, cpu in sorted(rows, key=lambda r: r[3] - r[2])[:a.top]:
        waits.add_row(f"{cls.rsplit('.', 1)[-1]}::{name}", f"{wall:.1f}", f"{cpu:.1f}", f"{wall - cpu:.1f}")
    console.print(waits)
    if spans:
        console.print(busy_workers(spans, a.workers), soft_wrap=True)
    return 0


def busy_workers(spans: list[tuple[float, float]], workers: int) -> str:
    """How the workers were used, from each test's start and duration: the suite's span, the seconds
    in which fewer than ``workers`` tests ran, and the last stretch in which they did (the tail, where
    the last tests run alone). A test's setup and teardown are in its junit time; the gaps between
    tests (scheduling, collection) are the idle seconds."""
    first = min(s for s, _ in spans)
    last = max(s + d for s, d in spans)
    seconds = int(last - first) + 1
    running = [0] * seconds
    for start, dur in spans:
        for i in range(int(start - first), min(seconds, int(start - first + dur) + 1)):
            running[i] += 1
    short = sum(1 for r in running if r < workers)
    tail = 0
    while tail < seconds and running[seconds - 1 - tail] < workers:
        tail += 1
    return (f"workers: tests ran over {seconds / 60:.1f} min; fewer than {workers} running in {short} s of it, "
            f"of which the last {tail} s (the tail)")


if __name__ == "__main__":
    raise SystemExit(main())
