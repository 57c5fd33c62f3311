"""chaos.runtime.torchrun is torchrun: the same exit status and failure report, with a lean start and end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

AGENT = [sys.executable, "-m", "chaos.runtime.torchrun", "--standalone", "--nproc-per-node", "2",
         "--max-restarts", "1", "--monitor-interval", "0.1"]


def _worker(tmp_path: Path, body: str) -> Path:
    # Workers that do not import torch: the agent is what is under test, and they keep it cheap.
    script = tmp_path / "worker.py"
    script.write_text("import os, sys\n" + body)
    return script


def test_a_job_that_succeeds_exits_0_after_its_workers_and_exit_handlers(tmp_path: Path) -> None:
    script = _worker(tmp_path, "open(os.path.join(sys.argv[1], 'done-' + os.environ['RANK']), 'w').close()\n")
    res = subprocess.run([*AGENT, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("done-*")) == ["done-0", "done-1"]


def test_a_job_whose_restarts_run_out_fails_as_torchrun_does(tmp_path: Path) -> None:
    script = _worker(tmp_path, "open(os.path.join(sys.argv[1], f\"try-{os.environ['RANK']}-{os.environ['TORCHELASTIC_RESTART_COUNT']}\"), 'w').close()\n"
                               "sys.exit(3 if os.environ['RANK'] == '1' else 0)\n")
    res = subprocess.run([*AGENT, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    # torchrun's own failure path: ChildFailedError's report naming the rank and its exit code, status 1.
    assert res.returncode == 1, res.stderr[-3000:]
    assert "ChildFailedError" in res.stderr and "exitcode  : 3" in res.stderr, res.stderr[-3000:]
    assert (tmp_path / "try-1-0").exists() and (tmp_path / "try-1-1").exists()  # one restart, as asked


def test_the_lean_exit_runs_exit_handlers_joins_threads_and_flushes(tmp_path: Path) -> None:
    code = ("import atexit, threading, time, sys\n"
            "atexit.register(lambda: print('handler ran'))\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('thread finished'))).start()\n"
            "sys.stdout.write('buffered')\n"
            "from chaos.runtime.torchrun import exit_now\n"
            "exit_now()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    assert res.stdout.index("buffered") < res.stdout.index("thread finished") < res.stdout.index("handler ran")
