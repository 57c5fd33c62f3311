"""What the command line prints when its output is captured (a CI log, a pipe): lines read as in a terminal,
never split at 80 columns mid-word (issue 58: verdict lines broken in the middle of a reason)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "a-long-experiment-name-that-runs-well-past-the-eighty-columns-a-pipe-used-to-wrap-at"


def _chaos(args: list[str], cwd: Path, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE",
                                                            "TTY_INTERACTIVE")}
    env["CHAOS_STATE_DIR"] = str(cwd / "state")
    if columns is not None:
        env["COLUMNS"] = columns
    # stdout and stderr to pipes, as a CI runner captures them: no terminal anywhere.
    return subprocess.run([sys.executable, "-m", "chaos", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("columns", [None, "60"])
def test_a_verdict_line_in_a_log_is_not_split(tmp_path: Path, columns: str | None) -> None:
    # A workload that prints one step and exits: completes is INCONCLUSIVE with a reason of ~110 characters.
    (tmp_path / "e.yaml").write_text(
        f"name: {NAME}\n"
        f"workload:\n  command: [{sys.executable}, -c, \"print('step 1')\"]\n  step_regex: 'step (?P<step>\\d+)'\n"
        f"checks:\n  - completes: {{}}\n")
    done = _chaos(["run", "--runs-dir", str(tmp_path / "runs"), "e.yaml"], tmp_path, columns)
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"INCONCLUSIVE {NAME}  ") and line.endswith("max step 1") for line in lines), done.stdout
    verdict = [line for line in lines if line.strip().startswith("INCONCLUSIVE completes:")]
    assert len(verdict) == 1 and verdict[0].rstrip().endswith("give the workload a 'steps' argument"), done.stdout
    assert any(line.strip().startswith(f"{tmp_path}/runs/{NAME}-") and line.endswith("/journal.json")
               for line in lines), done.stdout


def test_a_validate_problem_in_a_log_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text("name: x\nworkload: {scrpt: train.py}\n")
    done = _chaos(["validate", "e.yaml"], tmp_path)
    assert done.returncode == 2
    [line] = [line for line in done.stderr.splitlines() if line.startswith("e.yaml:2 workload.scrpt: ")]
    assert line.endswith("Did you mean 'script'?") and len(line) > 200, done.stderr


def test_the_console_follows_columns_or_does_not_wrap(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaos.report.console import make_console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("FORCE_TERMINAL", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    import io

    out = io.StringIO()
    console = make_console(file=out)
    assert not console.is_terminal and console.soft_wrap
    console.print("word " * 60)
    assert out.getvalue().count("\n") == 1
    monkeypatch.setenv("COLUMNS", "132")
    assert make_console(file=io.StringIO()).width == 132
