"""ci/bench/suite_cpu.py reads a junit XML and says where CPU and waiting went, from the file alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "ci" / "bench" / "suite_cpu.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<properties><property name="{speed}" value="1.10"/></properties>
<testcase classname="experiments.slow.yaml" name="slow" time="60.0">
  <properties><property name="cpu_s" value="10.0"/></properties></testcase>
<testcase classname="tests.unit.test_a" name="test_busy" time="12.0">
  <properties><property name="cpu_s" value="11.5"/></properties></testcase>
<testcase classname="tests.unit.test_a" name="test_unmeasured" time="3.0"/>
</testsuite></testsuites>
"""


def run(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    from suite_telemetry import HOST_SPEED_PROPERTY, WORKERS_PROPERTY

    junit = tmp_path / "suite.xml"
    junit.write_text(text.replace("{speed}", HOST_SPEED_PROPERTY).replace("{workers}", WORKERS_PROPERTY))
    return subprocess.run([sys.executable, str(SCRIPT), str(junit), *(args or ("--workers", "2"))],
                          capture_output=True, text=True, cwd=ROOT, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
                          timeout=60)


def test_cpu_floor_and_waits_are_computed_from_the_measured_tests(tmp_path: Path) -> None:
    done = run(tmp_path, JUNIT)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "import torch took 1.10 CPU-s" in out
    # 21.5 CPU-s over 2 cores; the test without cpu_s counts in neither sum.
    assert "22 CPU-s in 2 tests; floor on 2 cores 0.2 min" in out
    # Waits: 50 + 0.5 of 72 s summed wall; 72 s over 2 workers = 0.6 min; the slow experiment leads.
    assert "waits: 50 of 72 s of summed test wall; summed wall / 2 workers = 0.6 min" in out
    waits = out[out.index("Waits by test"):]
    assert waits.index("yaml::slow") < waits.index("test_a::test_busy")
    assert "50.0" in waits


def test_a_junit_without_cpu_figures_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, '<testsuites><testsuite name="p"><testcase classname="c" name="t" time="1"/>'
                         '</testsuite></testsuites>')
    assert done.returncode == 1 and "no test carries a cpu_s property" in done.stdout


def test_the_tail_is_where_fewer_tests_ran_than_workers(tmp_path: Path) -> None:
    # Two workers: a and b together for 10 s, then b alone for 20 s (the tail); c waited for nobody.
    case = ('<testcase classname="tests.unit.t" name="{n}" time="{d}"><properties>'
            '<property name="cpu_s" value="1"/><property name="started" value="{s}"/></properties></testcase>')
    cases = "".join(case.format(n=n, d=d, s=s) for n, d, s in (("a", 10, 1000), ("b", 30, 1000), ("c", 0, 1005)))
    done = run(tmp_path, f'<testsuites><testsuite name="p">{cases}</testsuite></testsuites>')
    assert done.returncode == 0, done.stderr
    assert "tests ran over 0.5 min; fewer than 2 running in 20 s of it, of which the last 20 s (the tail)" \
        in done.stdout.replace("\n", " "), done.stdout


def test_the_worker_count_is_the_one_the_run_recorded(tmp_path: Path) -> None:
    recorded = JUNIT.replace('value="1.10"/>', 'value="1.10"/><property name="{workers}" value="3"/>')
    done = run(tmp_path, recorded, "--top", "5")
    assert done.returncode == 0, done.stderr
    assert "summed wall / 3 workers = 0.4 min" in done.stdout
    # Nothing recorded (a run without xdist, or before the plugin recorded it): one worker.
    assert "summed wall / 1 workers = 1.2 min" in run(tmp_path, JUNIT, "--top", "5").stdout
