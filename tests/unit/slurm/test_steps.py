"""The node side of a fault on a user's cluster: only the run's own workers are listed or signalled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chaos.slurm import steps

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def workers(tmp_path: Path):
    """Two 'ranks' of this run, one of another run, one process that is no worker."""
    def spawn(run_dir: str, rank: str | None) -> subprocess.Popen:
        env = {**os.environ, "CHAOS_RUN_DIR": run_dir, "CHAOS_LAUNCH": "2", "TORCHELASTIC_RESTART_COUNT": "1"}
        if rank is not None:
            env.update(RANK=rank, LOCAL_RANK=rank)
        return subprocess.Popen(SLEEPER, env=env)

    mine = str(tmp_path / "run")
    procs = {"r0": spawn(mine, "0"), "r1": spawn(mine, "1"), "other": spawn(str(tmp_path / "other"), "0"),
             "agent": spawn(mine, None)}
    deadline = time.time() + 10
    while time.time() < deadline and len(steps.list_workers(mine)) < 2:  # until both exec'd python
        time.sleep(0.05)
    yield mine, procs
    for p in procs.values():
        p.kill()
        p.wait()


def test_list_names_only_this_runs_workers(workers) -> None:
    run_dir, procs = workers
    found = {w["pid"]: w for w in steps.list_workers(run_dir)}
    assert set(found) == {procs["r0"].pid, procs["r1"].pid}
    assert found[procs["r1"].pid]["rank"] == 1 and found[procs["r1"].pid]["launch"] == 2
    assert found[procs["r1"].pid]["restart_count"] == 1


def test_signal_rechecks_the_process_and_refuses_a_stranger(workers) -> None:
    run_dir, procs = workers
    r1 = psutil.Process(procs["r1"].pid)
    other = psutil.Process(procs["other"].pid)
    answer = steps.send(run_dir, "SIGSTOP", [f"{r1.pid}:{r1.create_time()!r}", f"{other.pid}:{other.create_time()!r}",
                                             f"{r1.pid}:{r1.create_time() - 5!r}"])
    assert answer["hit"] == [r1.pid] and sorted(answer["gone"]) == sorted([other.pid, r1.pid])
    deadline = time.time() + 5  # the stop is delivered asynchronously
    while r1.status() != psutil.STATUS_STOPPED and time.time() < deadline:
        time.sleep(0.02)
    assert r1.status() == psutil.STATUS_STOPPED and other.status() != psutil.STATUS_STOPPED
    steps.send(run_dir, "SIGCONT", [f"{r1.pid}:{r1.create_time()!r}"])


@pytest.mark.parametrize("how", ["stop file", "SIGTERM"])
def test_duty_cycle_step_leaves_the_rank_running_when_stopped(workers, tmp_path: Path, how: str) -> None:
    run_dir, procs = workers
    r0 = psutil.Process(procs["r0"].pid)
    stop = tmp_path / "duty.stop"
    step = subprocess.Popen([sys.executable, "-m", "chaos.slurm.steps", "duty", run_dir, f"{r0.pid}:{r0.create_time()!r}",
                             "0.05", "0.05", str(stop)], stdout=subprocess.PIPE, text=True)
    assert json.loads(step.stdout.readline())["started"] is True
    time.sleep(0.5)
    if how == "stop file":
        stop.touch()
    else:
        step.send_signal(signal.SIGTERM)
    out, _ = step.communicate(timeout=10)
    assert json.loads(out.strip().splitlines()[-1])["cycles"] > 0
    assert r0.status() != psutil.STATUS_STOPPED
