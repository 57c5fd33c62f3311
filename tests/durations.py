"""Longest-first test order from measured durations, so that the slowest tests start first under xdist.

The suite is a few hundred fast unit tests and about a hundred real multi-process runs of 10 to 100 s.
In collection order the slowest (the game day, the Slurm requeue) can be dealt last and run alone
at the end while the other workers sit idle. Longest-processing-time-first list scheduling
(``--dist load --maxschedchunk 1``, each free worker takes the next test) ends all workers within about
one short test of each other. pytest-split and Knapsack order CI tests the same way, from a committed
file of measured durations.

``tests/durations.json`` maps ``classname::name`` (as junit XML spells a test) to its measured wall
seconds. Write it from a junit XML of a full run::

    bash scripts/test.sh --junitxml=/tmp/suite.xml
    python tests/durations.py /tmp/suite.xml

The file only orders tests: a stale or missing entry costs some minutes of idle workers, never a
result. A test not in the file is estimated from where it lives (an experiment, an integration run,
a unit test).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")

GUESS_S = {"experiments": 30.0, "tests.integration": 10.0}
"""Seconds assumed for a test the file does not know, by where it lives: near the median of its kind
(measured 2026-11-24: experiments 25 s, integration runs 6 s), so a new one is not dealt last."""


def junit_key(nodeid: str) -> str:
    """``tests/unit/test_a.py::TestX::test_y[1]`` -> ``tests.unit.test_a.TestX::test_y[1]``, the
    classname and name that pytest's junit XML gives the same test."""
    if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's "@group" suffix (--dist loadgroup), as xdist finds it
        nodeid = nodeid.rsplit("@", 1)[0]
    parts = nodeid.split("::")
    path = parts[0].removesuffix(".py").replace("/", ".")
    return ".".join([path, *parts[1:-1]]) + "::" + parts[-1]


def load(path: Path = FILE) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
        return {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):  # unreadable, not JSON, not {name: seconds}
        return {}


def estimate(key: str, known: dict[str, float]) -> float:
    if key in known:
        return known[key]
    return next((s for prefix, s in GUESS_S.items() if key.startswith(prefix + ".")), 0.0)


def longest_first(nodeids: list[str], known: dict[str, float]) -> list[int]:
    """Indices of ``nodeids`` in longest-first order; ties keep collection order (a stable sort), so
    every xdist worker computes the same order."""
    keys = [junit_key(n) for n in nodeids]
    return sorted(range(len(nodeids)), key=lambda i: -estimate(keys[i], known))


def from_junit(xml: Path) -> dict[str, float]:
    """Each test's wall seconds from a junit XML, rounded (the order needs no more). Unit tests under a
    second are left out: unknown, they are estimated at 0 and keep their collection order at the end,
    which is where they belong; the file stays small."""
    out: dict[str, float] = {}
    for case in ET.parse(xml).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        name = str(case.get("name"))
        if name.rfind("@") > name.rfind("]"):  # xdist's "@group" suffix is not the test's name
            name = name.rsplit("@", 1)[0]
        key, wall = f"{case.get('classname')}::{name}", float(case.get("time") or 0)
        if wall >= 1.0 or estimate(key, {}) > 0:
            out[key] = round(wall, 1)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    durations = from_junit(Path(argv[0]))
    if not durations:
        print(f"{argv[0]}: no test that ran; {FILE} left as it was")
        return 1
    FILE.write_text(json.dumps(dict(sorted(durations.items())), indent=0) + "\n")
    print(f"{FILE}: {len(durations)} tests, {sum(durations.values()) / 60:.1f} min summed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
