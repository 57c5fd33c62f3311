"""The command line under bad input (exit 2 with a message, never a traceback) and ``chaos cleanup``'s safety."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.cli import main
from chaos.faults.base import Fault
from chaos.runtime.ledger import Ledger, unfinished_runs
from chaos.registry import FAULTS
from chaos.runtime.undo import KillTree, RemovePath, Signal

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ["a\0b", "x" * 5000, "../../../../etc/passwd", "/etc/passwd", "/", "/proc/self/mem", "-", "--",
           "~", "", "/dev/null", "\n", "runs/../../..", "$(id)"]


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    monkeypatch.setenv("CHAOS_STATE_DIR", str(path))
    return path


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@settings(max_examples=120, deadline=10000, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(cmd=st.sampled_from([["validate"], ["run", "--dry-run"], ["run", "--dry-run", "--runs-dir"], ["cleanup"],
                            ["cleanup", "--dry-run"], ["list"], ["schema"], ["gameday"], ["gameday", "--dry-run"],
                            ["nonsense"], []]),
       args=st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40)), min_size=1, max_size=3))
def test_hostile_arguments_exit_2_with_a_message(cmd: list[str], args: list[str], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    if cmd == ["run", "--dry-run", "--runs-dir"]:
        argv = [*cmd, args[0], str(ROOT / "experiments" / "rank-kill-ddp.yaml")]
    else:
        argv = [*cmd, *args]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = _exit_code(argv)
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code, err)
    if code == 2:
        assert err.strip(), f"{argv}: exit 2 without saying why"
    assert "Traceback" not in out + err


def test_a_yaml_bomb_on_the_command_line_exits_2_fast(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    lines = ["name: bomb", "workload: {script: x.py}", "a0: &a0 lol"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    bomb.write_text("\n".join(lines) + "\nfaults: [*a11]\n")
    res = subprocess.run([sys.executable, "-m", "chaos", "validate", str(bomb)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert "expands to more than" in res.stderr and "Traceback" not in res.stderr


def test_run_refuses_an_invalid_file_before_running_anything(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload: {script: workloads/ddp.py, ckpt_dir: /etc}\n")
    assert _exit_code(["run", str(bad), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "ckpt_dir" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ chaos cleanup


def _abandoned_run(tmp_path: Path, *undos) -> Path:
    """A run whose harness died: its ledger's opener is a process that no longer exists."""
    run = tmp_path / "runs" / "x-1"
    ledger = Ledger(run)
    ledger.open()
    with open(ledger.path, "a") as fh:  # as if a harness long gone had opened it
        fh.write(json.dumps({"opened": True, "pid": 999999, "create_time": 1.0, "dirs": []}) + "\n")
    for undo in undos:
        ledger.push("fault/0", undo)
    return run


def test_cleanup_without_argument_finds_and_undoes_every_unfinished_run(tmp_path: Path, capsys) -> None:
    run = _abandoned_run(tmp_path)
    ballast = run / "ballast"
    ballast.write_bytes(b"\0" * 1024)
    Ledger(run).push("fault/0", RemovePath(str(ballast)))
    assert _exit_code(["cleanup"]) == 0
    out = capsys.readouterr().out
    assert f"rm -rf {ballast}" in out and "clean" in out
    assert not ballast.exists() and Ledger(run).closed and unfinished_runs() == []
    assert _exit_code(["cleanup"]) == 0
    assert "no unfinished runs" in capsys.readouterr().out


def test_cleanup_dry_run_lists_the_commands_and_runs_none(tmp_path: Path, capsys) -> None:
    run = _abandoned_run(tmp_path)
    (run / "ballast").write_text("x")
    Ledger(run).push("fault/0", RemovePath(str(run / "ballast")))
    assert _exit_code(["cleanup", "--dry-run", str(run)]) == 0
    assert f"rm -rf {run / 'ballast'}" in capsys.readouterr().out
    assert (run / "ballast").exists() and not Ledger(run).closed


def test_cleanup_refuses_what_the_run_does_not_own(tmp_path: Path, capsys) -> None:
    precious = tmp_path / "precious"
    precious.write_text("keep")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = _abandoned_run(
            tmp_path, RemovePath(str(precious)), RemovePath(str(tmp_path / "runs" / "x-1" / ".." / "..")),
            KillTree(pid=victim.pid, create_time=psutil.Process(victim.pid).create_time() - 10),
            Signal(pid=victim.pid, create_time=None, signal="SIGKILL"), KillTree(pid=1, create_time=0.0))
        assert _exit_code(["cleanup", str(run)]) == 1
        out = capsys.readouterr().out
        # The two paths, pid 1 and the pid without a start time; the reused pid is skipped silently.
        assert out.count("refusing") == 4 and "STILL PRESENT" not in out, out
        assert precious.read_text() == "keep" and victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_cleanup_leaves_a_live_run_alone(tmp_path: Path, capsys) -> None:
    run = tmp_path / "runs" / "live"
    ledger = Ledger(run)
    ledger.open()  # opened by this very process: its harness is alive
    (run / "ballast").write_text("x")
    ledger.push("fault/0", RemovePath(str(run / "ballast")))
    assert _exit_code(["cleanup"]) == 0
    assert "still running" in capsys.readouterr().out
    assert (run / "ballast").exists()
    assert _exit_code(["cleanup", str(run)]) == 1
    assert _exit_code(["cleanup", "--force", str(run)]) == 0
    assert not (run / "ballast").exists()


@pytest.mark.parametrize("arg", ["/etc", "/", "a\0b", "x" * 5000, "/nonexistent"])
def test_cleanup_of_something_that_is_not_a_run_dir_is_a_usage_error(arg: str, capsys) -> None:
    assert _exit_code(["cleanup", arg]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_cleanup_stops_processes_that_carry_the_run_dir(tmp_path: Path, capsys) -> None:
    """A worker re-parented away from the launcher the ledger knows is still found by its CHAOS_RUN_DIR."""
    run = _abandoned_run(tmp_path)
    env = {**os.environ, "CHAOS_RUN_DIR": str(run)}
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, "CHAOS_RUN_DIR": str(tmp_path / "runs" / "x-10")})
    try:
        assert _exit_code(["cleanup", str(run)]) == 0
        assert f"stopped pid {stray.pid}" in capsys.readouterr().out
        stray.wait(timeout=10)
        assert other.poll() is None, "a process of another run was touched"
    finally:
        for p in (stray, other):
            if p.poll() is None:
                p.kill()
            p.wait()


# ------------------------------------------------------------------ dry run


@pytest.mark.parametrize("kind", FAULTS.kinds())
def test_every_fault_plans_its_own_commands(kind: str) -> None:
    """``--dry-run`` prints what ``Fault.plan`` returns; the base version only echoes the config back."""
    assert FAULTS.get(kind).plan is not Fault.plan, (
        f"fault '{kind}' does not override plan(): `chaos run --dry-run` cannot show the commands it would run")


def test_report_of_a_folder_of_runs_writes_an_index(tmp_path, capsys) -> None:
    import json as _json

    from chaos.cli import main as _main

    def journal(name: str, exit_code: int, checks: list) -> dict:
        return {"experiment": name, "description": "", "source": "x.yaml", "run_dir": "", "started": 1.0,
                "wall_s": 10.0, "exit_code": exit_code, "workload_exit_code": 0, "timed_out": False,
                "attempts": ["0.0"], "max_step": 5, "diagnostics": [], "commands": [], "revert_failures": [],
                "faults": [{"index": 0, "kind": "kill-rank", "label": "kill-rank#0", "t_inject": 2.0, "details": {},
                            "recovery": {"resume_s": 2.5}}],
                "checks": checks}

    for name, code, checks in (("rank-kill", 0, [{"kind": "completes", "verdict": "pass", "reason": "ok"}]),
                               ("silent", 1, [{"kind": "exactly_once", "verdict": "inconclusive", "reason": "?"}]),
                               ("rank-kill-golden", 0, [])):
        run = tmp_path / f"{name}-1"
        (run / "events").mkdir(parents=True)
        (run / "journal.json").write_text(_json.dumps(journal(name, code, checks)))
    assert _main(["report", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text()
    assert "2 run(s) (+1 fault-free reference run(s))" in index and "1 passed, 1 did not" in index
    assert "| rank-kill | PASS | PASS |  | 2.50 |" in index
    # Exit 1 with no failed check: INCONCLUSIVE, the headline's word (journals without a verdict field too).
    assert "| silent | INCONCLUSIVE |  | INCONCLUSIVE |" in index and "rank-kill-golden |" not in index
    assert (tmp_path / "silent-1" / "report.md").exists()


def test_gameday_dry_run_prints_the_drawn_schedule_and_runs_nothing(tmp_path: Path, capsys) -> None:
    plan = ROOT / "experiments" / "gameday-smoke-ddp.yaml"
    assert main(["gameday", "--dry-run", "--runs-dir", str(tmp_path / "runs"), str(plan)]) == 0
    out = capsys.readouterr().out
    assert "llama3-405b" in out and "expected 3.9 faults" in out and "software#1" in out
    assert not (tmp_path / "runs").exists()


def test_gameday_refuses_an_experiment_without_a_plan(capsys) -> None:
    assert _exit_code(["gameday", str(ROOT / "experiments" / "rank-kill-ddp.yaml")]) == 2
    assert "has no 'gameday:' section" in capsys.readouterr().err


def test_a_signal_after_the_command_returned_keeps_its_exit_status() -> None:
    # The command's status is decided when it returns: a Ctrl-C while the process exits is ignored, so
    # it ends with that status (here 2, no command given), not by SIGINT (-2) or a KeyboardInterrupt.
    code = ("import os, signal, sys, time\n"
            "from chaos import cli\n"
            "sys.argv = ['chaos']\n"
            "status = cli.entry()\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(0.2)\n"
            "raise SystemExit(status)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "usage: chaos" in done.stdout and "KeyboardInterrupt" not in done.stderr


def test_a_command_imports_only_its_own_module_and_help_lists_every_command(capsys) -> None:
    from chaos.cli import build_parser

    everything = build_parser([])
    commands = sorted(everything._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {"run", "cleanup", "doctor", "verify-checkpoint"} <= set(commands), commands
    for name in commands:
        # Each registered name is found from its own command line, with its own options intact.
        alone = build_parser([name, "--help"])
        assert sorted(alone._subparsers._group_actions[0].choices) == [name]  # type: ignore[union-attr]
    # A typo still gets the full list of commands in its error.
    assert _exit_code(["clenaup"]) == 2
    assert "cleanup" in capsys.readouterr().err
    # The cheap commands leave the runner, the report code and pydantic's models unimported.
    probe = ("import sys; from chaos.cli import build_parser; build_parser(['cleanup']); "
             "print(sorted(m for m in ('chaos.run.runner', 'chaos.report.html', 'chaos.spec.experiment') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_validate_says_when_an_experiment_that_restarts_the_job_judges_no_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32 item 11: a stack that retrains from step 0 after the fault passed four shipped experiments."""
    from chaos.commands.validate import resume_unjudged
    from chaos.spec.load import load_experiment

    repo = Path(__file__).resolve().parents[2]
    path = tmp_path / "restart.yaml"
    path.write_text(f"name: restart\nworkload: {{script: {repo}/workloads/ddp.py}}\nfaults:\n"
                    "  - {kind: kill-rank, rank: 1, trigger: {at_step: 12}}\n"
                    "checks:\n  - completes: {min_restarts: 1}\n  - exactly_once: {}\n")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning: it restarts the job (completes: min_restarts 1) but no check fails a restart from scratch" in out
    assert "recovery_time: {metric: lost_steps, max: 0}" in out
    path.write_text(path.read_text() + "  - recovery_time: {metric: lost_steps, max: 0}\n")
    assert resume_unjudged(load_experiment(path)) is None
    # Every shipped experiment that restarts the job judges its resume.
    unjudged = {p.name: why for p in sorted((repo / "experiments").glob("*.yaml"))
                if (why := resume_unjudged(load_experiment(p)))}
    assert not unjudged, unjudged
