"""The project's own suite telemetry, a pytest plugin loaded by tests/conftest.py (never by users' runs of the
chaos plugin): how fast the host was when the run started, how many xdist workers shared it, and when
each test started and how much CPU it used, as junit properties that ci/bench/suite_cpu.py and
ci/bench/suite_accounting.py read.

A shared 2-core runner does not run at one speed: the same box measured ``import torch`` at 1.7
CPU-s in a morning and 2.0-2.8 in the afternoon, and every test's CPU moved with it (the suite's
2,128 against 1,782 CPU-s on the same code). A suite time means something next to another only
with the speed it ran at.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
from typing import Any

import pytest

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


HOST_SPEED_PROPERTY = "host_import_torch_cpu_s"
"""The junit testsuite property with the host's speed at the start of the run (import_torch_cpu_s)."""
WORKERS_PROPERTY = "xdist_workers"
"""The junit testsuite property with the run's pytest-xdist worker count (``-n``), when it had workers."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """A run that writes junit XML records how fast the host was when it started (suite times from
    different hours of the same box differ by up to 1.4x for the same code: import_torch_cpu_s) and
    how many xdist workers shared it."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes the XML
        return
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is None:
        return
    workers = getattr(session.config.option, "numprocesses", None)  # -n, resolved by xdist ("auto": a count)
    if workers:
        xml.add_global_property(WORKERS_PROPERTY, workers)
    speed = import_torch_cpu_s()
    if speed is not None:
        xml.add_global_property(HOST_SPEED_PROPERTY, speed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """When each test started (epoch seconds), as the junit property ``started``: with each test's time
    it says how many workers were busy at each moment, and how long the last ones ran alone."""
    import time

    item.user_properties.append(("started", round(time.time(), 2)))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Every test's CPU seconds in its call (this process and every descendant it reaped: torchrun, its ranks,
    the golden run; a fixture's runs are in none) as the junit property ``cpu_s``. On a CPU-bound runner wall time says who was slowed; CPU time says
    who did the work (ci/bench/suite_cpu.py sums it per file from the junit XML)."""
    import resource

    def used() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    before = used()
    yield
    item.user_properties.append(("cpu_s", round(used() - before, 2)))
