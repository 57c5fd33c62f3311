"""no_orphans fails while a process of the run is alive and names it, and passes once it is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from histsim import make_outcome

from chaos.checks.no_orphans import NoOrphans, NoOrphansConfig
from chaos.evidence.events import History


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


def _fake_docker(tmp_path: Path, monkeypatch) -> None:
    """A docker CLI whose daemon is unreachable, first on PATH: its listings fail."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "docker"
    tool.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2\n"
                    "exit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_listing_that_failed_is_unknown_not_clean(tmp_path: Path, monkeypatch) -> None:
    """Issue 32 item 12: a docker daemon that is down once read as 'no containers left'."""
    _fake_docker(tmp_path, monkeypatch)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = make_outcome(History([{"ev": "launch", "t": 1.0, "source": "harness", "target": "docker"}]))
    outcome.run_dir = run_dir
    result = NoOrphans(NoOrphansConfig()).evaluate(outcome)
    assert result.verdict == "inconclusive", result.reason
    assert "'docker ps -a --format {{.Names}} {{.Status}}' exited 1: Cannot connect to the Docker daemon" \
        in result.reason
    # A run that never touched docker cannot have left a container: the failed listing does not matter.
    local = make_outcome(History([{"ev": "launch", "t": 1.0, "source": "harness", "target": "local"}]))
    local.run_dir = run_dir
    assert NoOrphans(NoOrphansConfig()).evaluate(local).verdict == "pass"
    # A command the run ran through the harness's shell makes its tool's listing count too.
    ran = make_outcome(History([{"ev": "launch", "t": 1.0, "source": "harness", "target": "local"},
                                {"ev": "cmd", "t": 2.0, "source": "harness", "argv": ["docker", "network", "rm", "x"]}]))
    ran.run_dir = run_dir
    assert NoOrphans(NoOrphansConfig()).evaluate(ran).verdict == "inconclusive"
