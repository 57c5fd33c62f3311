"""The ledger: written before each action, replayed after a crash, every revert attempted, and closed
whatever ends the run (success, failed check, timeout, signal, a crash in a fault, target or check)."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError
from chaos.spec.load import load_experiment
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.ledger import LEDGER_NAME, Ledger, unfinished_runs
from chaos.registry import CHECKS, FAULTS
from chaos.run.runner import Runner
from chaos.runtime.shell import Shell
from chaos.runtime.undo import Command, KillTree, RemovePath, Undo

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_torchrun.py"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    monkeypatch.setenv("CHAOS_STATE_DIR", str(path))
    return path


class Boom(Undo):
    """An undo that always fails (to show the others still run)."""

    op = "test_boom"

    def run(self, shell: Shell) -> None:
        raise OSError("device busy")

    def describe(self) -> str:
        return "boom"


def _lines(ledger: Ledger) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.path.read_text().splitlines()]


def test_push_is_on_disk_before_the_action(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "run")
    ledger.open()
    ballast = tmp_path / "run" / "ballast"
    ledger.push("fault/0", RemovePath(str(ballast)))
    # A harness SIGKILLed right here (before creating the ballast) is replayed from disk alone.
    replayed = Ledger(tmp_path / "run")
    assert [e.undo for e in replayed.pending()] == [RemovePath(str(ballast))]
    assert _lines(ledger)[-1]["undo"] == {"op": "rm", "path": str(ballast)}


def test_revert_attempts_every_entry_collects_failures_and_keeps_failed_ones_pending(tmp_path: Path) -> None:
    run = tmp_path / "run"
    ledger = Ledger(run)
    ledger.open()
    files = [run / f"b{i}" for i in range(3)]
    ledger.push("fault/0", RemovePath(str(files[0])))
    ledger.push("fault/0", Boom())
    ledger.push("fault/1", RemovePath(str(files[1])))
    ledger.push("target", Boom())
    ledger.push("target", RemovePath(str(files[2])))
    for f in files:
        f.write_text("x")
    failures = ledger.revert(Shell())
    assert sorted(f.owner for f in failures) == ["fault/0", "target"]
    assert all(f.error == "device busy" for f in failures)
    assert not any(f.exists() for f in files)
    assert [type(e.undo) for e in ledger.pending()] == [Boom, Boom]
    ledger.close()
    assert not ledger.closed, "a ledger with failed reverts must stay open for chaos cleanup"
    assert Ledger(run).pending() and run.resolve() in [d.resolve() for d in unfinished_runs()]


def test_revert_runs_newest_first_and_only_the_owners(tmp_path: Path) -> None:
    order: list[str] = []

    class Note(Undo):
        op = "test_note"

        def __init__(self, name: str = "") -> None:
            self.name = name

        def run(self, shell: Shell) -> None:
            order.append(self.name)

        def describe(self) -> str:
            return self.name

        def to_json(self) -> dict[str, Any]:
            return {"op": self.op, "name": self.name}

    ledger = Ledger(tmp_path / "run")
    for name, owner in [("a", "fault/0"), ("b", "fault/1"), ("c", "fault/0/sub"), ("d", "fault/10")]:
        ledger.push(owner, Note(name))
    ledger.revert(Shell(), owner="fault/0")
    assert order == ["c", "a"]
    ledger.revert(Shell())
    assert order == ["c", "a", "d", "b"]


def test_done_entries_are_not_replayed_and_close_unregisters(tmp_path: Path) -> None:
    run = tmp_path / "run"
    ledger = Ledger(run)
    ledger.open()
    assert unfinished_runs() == [run.resolve()] or [d.resolve() for d in unfinished_runs()] == [run.resolve()]
    ledger.push("fault/0", RemovePath(str(run / "x")))
    ledger.revert(Shell())
    assert Ledger(run).pending() == []
    ledger.close()
    assert Ledger(run).closed
    assert unfinished_runs() == []


def test_a_torn_last_line_and_unreadable_records_never_crash_the_replay(tmp_path: Path) -> None:
    run = tmp_path / "run"
    ledger = Ledger(run)
    ledger.open()
    ledger.push("fault/0", RemovePath(str(run / "x")))
    with open(ledger.path, "a") as fh:
        fh.write('{"id": 2, "owner": "fault/0", "undo": {"op": "format_disk"}}\n')
        fh.write("[1, 2]\n")
        fh.write('{"id": "x", "owner": "f", "undo": {"op": "rm"}}\n')
        fh.write('{"id": 3, "owner": "fault/0", "und')  # SIGKILL mid-write
    replayed = Ledger(run)
    assert [e.id for e in replayed.pending()] == [1]
    assert len(replayed.unreadable) == 3


def test_out_of_scope_undo_is_refused_reported_and_not_retried(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.write_text("keep")
    run = tmp_path / "run"
    ledger = Ledger(run)
    ledger.open()
    # As if the ledger had been edited, or a fault recorded a path it does not own.
    ledger.push("fault/0", RemovePath(str(outside)))
    ledger.push("fault/0", KillTree(pid=1, create_time=0.0))
    failures = ledger.revert(Shell())
    assert len(failures) == 2 and all("refusing" in f.error for f in failures)
    assert outside.read_text() == "keep"
    assert Ledger(run).pending() == []


def test_the_checkpoint_dir_given_at_open_is_in_scope(tmp_path: Path) -> None:
    ckpt = tmp_path / "elsewhere" / "ckpt"
    ckpt.mkdir(parents=True)
    (ckpt / "ballast").write_text("x")
    ledger = Ledger(tmp_path / "run")
    ledger.open(dirs=[ckpt])
    ledger.push("fault/0", RemovePath(str(ckpt / "ballast")))
    assert Ledger(tmp_path / "run").revert(Shell()) == []
    assert not (ckpt / "ballast").exists()


def test_harness_alive_tells_a_live_run_from_an_abandoned_one(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "run")
    ledger.open()
    assert Ledger(tmp_path / "run").harness_alive()
    with open(ledger.path, "a") as fh:
        fh.write(json.dumps({"opened": True, "pid": os.getpid(), "create_time": 1.0, "dirs": []}) + "\n")
    assert not Ledger(tmp_path / "run").harness_alive()


def test_unfinished_runs_forgets_markers_of_deleted_runs(tmp_path: Path, state_dir: Path) -> None:
    ledger = Ledger(tmp_path / "run")
    ledger.open()
    (tmp_path / "run" / LEDGER_NAME).unlink()
    assert unfinished_runs() == []
    assert list((state_dir / "active").iterdir()) == []


# ------------------------------------------------------------------ the runner always reverts and closes


class BallastConfig(FaultConfig):
    crash: str = ""
    """'' | inject | prepare | capability: where to raise."""


class Ballast(Fault):
    """Test fault: a ballast file in the run dir, registered before it is written; can crash on demand."""

    kind = "test-ballast"
    Config = BallastConfig

    def prepare(self, run: RunContext) -> None:
        path = run.run_dir / "prepared"
        run.ledger.push(self.owner + "/prep", RemovePath(str(path)))
        path.write_text("x")
        if self.config.crash == "prepare":
            raise RuntimeError("bug in prepare")
        if self.config.crash == "capability":
            raise CapabilityError("needs root: run as root")

    def inject(self, run: RunContext) -> dict[str, Any]:
        path = run.run_dir / "ballast"
        run.ledger.push(self.owner, RemovePath(str(path)))
        path.write_bytes(b"\0" * 4096)
        if self.config.crash == "inject":
            raise RuntimeError("bug in inject")
        if self.config.crash == "sigint":
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        return {"path": str(path)}


class CrashingCheck(Check):
    kind = "test-crash"
    Config = CheckConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        raise ZeroDivisionError("bug in a check")


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    FAULTS.kinds()
    CHECKS.kinds()
    monkeypatch.setitem(FAULTS._items, "test-ballast", Ballast)
    monkeypatch.setitem(CHECKS._items, "test-crash", CrashingCheck)


def _experiment(tmp_path: Path, *, crash: str = "", steps: int = 30, timeout_s: float = 60, checks: str = "[]"):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: ledger-paths
        workload:
          command: [{sys.executable}, {FAKE}, --steps, "{steps}", --step-sleep, "0.03"]
          join_timeout_s: 20
        faults:
          - kind: test-ballast
            crash: "{crash}"
            trigger: {{at_step: 3}}
        checks: {checks}
        timeout_s: {timeout_s}
        """))
    return load_experiment(path)


def _assert_reverted_and_closed(run_dir: Path) -> None:
    ledger = Ledger(run_dir)
    assert ledger.pending() == [], [e.undo.describe() for e in ledger.pending()]
    assert ledger.closed
    assert not (run_dir / "ballast").exists() and not (run_dir / "prepared").exists()
    assert unfinished_runs() == []


@pytest.mark.parametrize("case, kw, code", [
    ("success", {}, 0),
    ("failed check", {"checks": "[{completes: {min_step: 999}}]"}, 1),
    ("crashing check", {"checks": "[test-crash]"}, 3),
    ("timeout", {"steps": 100000, "timeout_s": 3}, None),
    ("crash in inject", {"crash": "inject", "steps": 100000}, 3),
    ("SIGINT", {"crash": "sigint", "steps": 100000}, 130),
])
def test_every_ending_reverts_and_closes_the_ledger(tmp_path: Path, registered: None, case: str,
                                                    kw: dict, code: int | None) -> None:
    report = Runner(_experiment(tmp_path, **kw), runs_root=tmp_path / "runs").run()
    if code is not None:
        assert report.exit_code == code, [(c.kind, c.verdict, c.reason) for c in report.checks]
    if case == "timeout":
        assert report.outcome.timed_out
    assert report.revert_failures == []
    _assert_reverted_and_closed(report.run_dir)


@pytest.mark.parametrize("crash, error", [("prepare", RuntimeError), ("capability", CapabilityError)])
def test_an_error_before_launch_still_reverts_what_prepare_did(tmp_path: Path, registered: None, crash: str,
                                                              error: type) -> None:
    runner = Runner(_experiment(tmp_path, crash=crash), runs_root=tmp_path / "runs")
    if error is RuntimeError:
        report = runner.run()
        assert report.exit_code == 3 and any("bug in prepare" in d for d in report.outcome.diagnostics)
    else:
        with pytest.raises(CapabilityError):
            runner.run()
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert not (run_dir / "output.log").exists(), "the workload must not launch after prepare failed"
    _assert_reverted_and_closed(run_dir)


def test_a_signal_during_the_reverts_does_not_abort_them(tmp_path: Path, registered: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    runner = Runner(_experiment(tmp_path), runs_root=tmp_path / "runs")
    finish = runner._finish

    def finish_interrupted(run: RunContext, armed: list, records: list) -> list[str]:
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, in the middle of the cleanup
        return finish(run, armed, records)

    runner._finish = finish_interrupted  # type: ignore[method-assign]
    report = runner.run()
    assert "interrupt again to skip the reverts" in capsys.readouterr().err
    _assert_reverted_and_closed(report.run_dir)


def test_dry_run_executes_nothing_and_writes_no_ledger_action(tmp_path: Path, registered: None) -> None:
    exp = _experiment(tmp_path)
    runner = Runner(exp, runs_root=tmp_path / "runs", dry_run=True)
    lines = runner.plan()
    assert any(str(FAKE) in line for line in lines), lines
    # Not even the run directory: a dry run leaves no trace on disk.
    assert not (tmp_path / "runs").exists()


def test_command_undo_failure_is_reported_with_its_command(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "run")
    ledger.push("fault/0", Command(["false"]))
    (failure,) = ledger.revert(Shell())
    assert failure.action == "false" and "exit 1" in failure.error
