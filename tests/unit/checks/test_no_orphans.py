"""no_orphans fails while a process of the run is alive and names it, and passes once it is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from histsim import make_outcome

from chaos.checks.no_orphans import NoOrphans, NoOrphansConfig
from chaos.events import History


def test_a_live_process_of_the_run_fails_the_check(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = make_outcome(History([{"ev": "launch", "t": 1.0, "source": "harness"}]))
    outcome.run_dir = run_dir
    check = NoOrphans(NoOrphansConfig())
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, "CHAOS_RUN_DIR": str(run_dir.resolve())})
    try:
        result = check.evaluate(outcome)
        assert result.verdict == "fail"
        assert f"pid {proc.pid}" in result.reason and f"chaos cleanup {run_dir}" in result.reason
    finally:
        proc.kill()
        proc.wait()
    assert check.evaluate(outcome).verdict == "pass"


def test_a_run_that_launched_nothing_proves_nothing(tmp_path: Path) -> None:
    outcome = make_outcome(History())
    outcome.run_dir = tmp_path
    result = NoOrphans(NoOrphansConfig()).evaluate(outcome)
    assert result.verdict == "inconclusive" and "no launch record" in result.reason
