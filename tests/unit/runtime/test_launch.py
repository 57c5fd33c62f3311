"""How a workload is started: its command resolved like the harness's own environment, its own directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from chaos.runtime.launch import resolve_command, with_run_dir


def test_a_bare_command_is_the_one_beside_the_harness_interpreter(tmp_path: Path) -> None:
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "torchrun").write_text("#!/bin/sh\n")
    (venv / "torchrun").chmod(0o755)
    (venv / "notes.txt").write_text("")
    python = str(venv / "python")
    assert resolve_command("torchrun", python) == str(venv / "torchrun")
    assert resolve_command("notes.txt", python) == "notes.txt"  # not executable: left to PATH
    assert resolve_command("accelerate", python) == "accelerate"  # not there: left to PATH
    assert resolve_command("/opt/bin/torchrun", python) == "/opt/bin/torchrun"  # a path is the user's choice
    assert resolve_command("bin/torchrun", python) == "bin/torchrun"


def test_the_harness_interpreter_finds_its_own_torchrun() -> None:
    beside = Path(sys.executable).parent / "torchrun"
    if beside.exists():
        assert resolve_command("torchrun") == str(beside)


def test_run_dir_is_substituted_as_an_absolute_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = with_run_dir("{run_dir}/work", Path("runs/x"))
    assert out == os.path.join(str(tmp_path), "runs", "x", "work")
    assert with_run_dir("/scratch/ckpt", Path("runs/x")) == "/scratch/ckpt"
