"""Undo actions: idempotent, and refusing anything outside the run (other PIDs, reused PIDs, paths outside its directories)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chaos.runtime.shell import Shell
from chaos.runtime.undo import (Command, KillTree, RemovePath, RestoreFile, Scope, Signal, Undo, UndoFormatError, Unmount,
                        same_process)


@pytest.fixture
def scope(tmp_path: Path) -> Scope:
    (tmp_path / "run").mkdir()
    (tmp_path / "ckpt").mkdir()
    return Scope((tmp_path / "run", tmp_path / "ckpt"))


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _status(pid: int) -> str:
    return psutil.Process(pid).status()


# ------------------------------------------------------------------ paths


@pytest.mark.parametrize("rel", ["run/ballast", "run/a/b/c", "ckpt/step-10/shard.distcp"])
def test_paths_inside_the_run_are_allowed(scope: Scope, tmp_path: Path, rel: str) -> None:
    assert RemovePath(str(tmp_path / rel)).refusal(scope) is None


@pytest.mark.parametrize("path", ["/etc/passwd", "/", "{tmp}/run/../outside", "{tmp}/runx/ballast", "{tmp}/run",
                                  "relative/file", "{tmp}/run/\0nul", "{tmp}/run/..", "{tmp}/run/x/..",
                                  "{tmp}/run/.", "{tmp}/run/"])
def test_remove_path_refuses_outside_the_run(scope: Scope, tmp_path: Path, path: str) -> None:
    assert RemovePath(path.format(tmp=tmp_path)).refusal(scope) is not None


def test_a_symlinked_directory_does_not_widen_the_scope(scope: Scope, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    (tmp_path / "run" / "link").symlink_to(outside)
    assert RemovePath(str(tmp_path / "run" / "link" / "precious")).refusal(scope) is not None
    # The link itself is the run's: removing it leaves its target alone.
    undo = RemovePath(str(tmp_path / "run" / "link"))
    assert undo.refusal(scope) is None
    undo.run(Shell())
    assert (outside / "precious").read_text() == "keep"
    assert not (tmp_path / "run" / "link").is_symlink()


def test_remove_path_is_idempotent_and_reports_leftovers(tmp_path: Path) -> None:
    ballast = tmp_path / "ballast"
    ballast.write_bytes(b"x" * 100)
    undo = RemovePath(str(ballast))
    assert "still exists" in (undo.leftover(Shell()) or "")
    undo.run(Shell())
    undo.run(Shell())
    assert not ballast.exists()
    assert undo.leftover(Shell()) is None


def test_unmount_may_target_the_checkpoint_dir_itself_but_nothing_outside(scope: Scope, tmp_path: Path) -> None:
    assert Unmount(str(tmp_path / "ckpt")).refusal(scope) is None
    assert Unmount("/").refusal(scope) is not None
    assert Unmount("/proc").refusal(scope) is not None
    assert Unmount(str(tmp_path)).refusal(scope) is not None


def test_unmount_of_something_not_mounted_does_nothing(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    class Recorder(Shell):
        def run(self, argv, **kw):  # type: ignore[override]
            calls.append(list(argv))
            return super().run(argv, **kw)

    Unmount(str(tmp_path)).run(Recorder())
    assert calls == []
    assert Unmount(str(tmp_path)).leftover(Shell()) is None


def test_restore_file_refuses_a_backup_or_target_outside(scope: Scope, tmp_path: Path) -> None:
    inside = str(tmp_path / "ckpt" / "shard")
    assert RestoreFile(inside, str(tmp_path / "run" / "shard.bak")).refusal(scope) is None
    assert RestoreFile("/etc/hosts", str(tmp_path / "run" / "x")).refusal(scope) is not None
    assert RestoreFile(inside, "/etc/shadow").refusal(scope) is not None


def test_restore_file_is_idempotent(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("corrupted")
    (tmp_path / "f.bak").write_text("original")
    undo = RestoreFile(str(tmp_path / "f"), str(tmp_path / "f.bak"))
    assert undo.leftover(Shell()) is not None
    undo.run(Shell())
    undo.run(Shell())
    assert (tmp_path / "f").read_text() == "original"
    assert undo.leftover(Shell()) is None


# ------------------------------------------------------------------ processes


@pytest.mark.parametrize("pid", [0, 1, -1, True, "12"])
def test_signals_refuse_pids_that_are_not_one_process_of_the_run(scope: Scope, pid: object) -> None:
    assert KillTree(pid=pid, create_time=1.0).refusal(scope) is not None  # type: ignore[arg-type]
    assert Signal(pid=pid, create_time=1.0).refusal(scope) is not None  # type: ignore[arg-type]


def test_signals_refuse_the_harness_and_its_parents(scope: Scope) -> None:
    me = psutil.Process()
    assert KillTree(pid=me.pid, create_time=me.create_time()).refusal(scope) is not None
    parent = me.parent()
    assert parent is not None
    assert Signal(pid=parent.pid, create_time=parent.create_time(), signal="SIGCONT").refusal(scope) is not None
    assert same_process(me.pid, me.create_time()) is None


def test_signals_refuse_a_pid_without_a_start_time(scope: Scope, sleeper: subprocess.Popen) -> None:
    assert KillTree(pid=sleeper.pid, create_time=None).refusal(scope) is not None
    KillTree(pid=sleeper.pid, create_time=None).run(Shell())
    assert sleeper.poll() is None


def test_kill_tree_refuses_a_reused_pid(sleeper: subprocess.Popen) -> None:
    """A PID that now names another process (a different start time) is left alone."""
    real = psutil.Process(sleeper.pid).create_time()
    undo = KillTree(pid=sleeper.pid, create_time=real - 5.0, grace_s=0.5)
    assert undo.leftover(Shell()) is None
    undo.run(Shell())
    time.sleep(0.2)
    assert sleeper.poll() is None


def test_signal_refuses_a_reused_pid(sleeper: subprocess.Popen) -> None:
    real = psutil.Process(sleeper.pid).create_time()
    Signal(pid=sleeper.pid, create_time=real + 3.0, signal="SIGSTOP").run(Shell())
    time.sleep(0.1)
    assert _status(sleeper.pid) != psutil.STATUS_STOPPED


def test_kill_tree_kills_a_stopped_tree_and_is_idempotent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess,sys,time;"
                               "subprocess.Popen([sys.executable,'-c','import time;time.sleep(60)']);time.sleep(60)"],
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(parent.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = psutil.Process(parent.pid).children()[0]
        os.kill(child.pid, signal.SIGSTOP)
        undo = KillTree(pid=parent.pid, create_time=psutil.Process(parent.pid).create_time(), grace_s=2)
        assert "still running" in (undo.leftover(Shell()) or "")
        undo.run(Shell())
        parent.wait(timeout=10)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        undo.run(Shell())
        assert undo.leftover(Shell()) is None
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_signal_undo_resumes_a_stopped_process_once_and_reports_it(sleeper: subprocess.Popen) -> None:
    os.kill(sleeper.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while _status(sleeper.pid) != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.02)
    undo = Signal(pid=sleeper.pid, create_time=psutil.Process(sleeper.pid).create_time(), signal="SIGCONT")
    assert "still stopped" in (undo.leftover(Shell()) or "")
    undo.run(Shell())
    undo.run(Shell())
    time.sleep(0.1)
    assert _status(sleeper.pid) != psutil.STATUS_STOPPED
    assert undo.leftover(Shell()) is None


def test_signal_to_a_dead_process_is_a_no_op() -> None:
    proc = subprocess.Popen(["true"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    for undo in (Signal(pid=proc.pid, create_time=created), KillTree(pid=proc.pid, create_time=created)):
        assert undo.run(Shell()) is None  # no exception: a dead process is already what the undo wants
        assert undo.leftover(Shell()) is None, undo


# ------------------------------------------------------------------ commands and records


def test_command_only_if_makes_it_idempotent_and_probes_leftovers(tmp_path: Path) -> None:
    marker = tmp_path / "table"
    marker.write_text("")
    undo = Command(["rm", str(marker)], only_if=["test", "-e", str(marker)])
    assert undo.leftover(Shell()) is not None
    undo.run(Shell())
    undo.run(Shell())  # the probe fails now: rm is not run a second time (it would fail)
    assert undo.leftover(Shell()) is None
    assert undo.describe() == f"test -e {marker} && rm {marker}"


def test_a_malformed_command_is_refused(scope: Scope) -> None:
    assert Command([]).refusal(scope) is not None
    assert Command(["nft", 3]).refusal(scope) is not None  # type: ignore[list-item]


def test_every_undo_round_trips_through_json() -> None:
    samples: list[Undo] = [Command(["tc", "qdisc", "del"], only_if=["true"]), Signal(pid=5, create_time=1.5),
                           KillTree(pid=7, create_time=2.5), Unmount("/x"), RemovePath("/y"), RestoreFile("/a", "/b")]
    for undo in samples:
        assert Undo.from_json(undo.to_json()) == undo


@pytest.mark.parametrize("data", [{"op": "format_disk"}, {"op": "rm", "path": "/x", "extra": 1}, [], "rm", None,
                                  {"path": "/x"}])
def test_unknown_or_malformed_undo_records_are_rejected_clearly(data: object) -> None:
    with pytest.raises(UndoFormatError):
        Undo.from_json(data)
