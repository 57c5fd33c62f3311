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


def _run(tmp_path: Path, workload: str):
    import random

    from chaos.runtime.context import HarnessLog, RunContext
    from chaos.runtime.ledger import Ledger
    from chaos.runtime.shell import Shell
    from chaos.spec.load import load_experiment

    (tmp_path / "train.py").write_text("")
    exp = load_experiment(tmp_path / "t.yaml", text=f"name: t\nworkload: {{script: train.py, {workload}}}\n")
    log = HarnessLog(tmp_path / "harness.jsonl")
    return RunContext(experiment=exp, run_dir=tmp_path, ckpt_dir=tmp_path / "ckpt", ledger=Ledger(tmp_path),
                      shell=Shell(log), log=log, rng=random.Random(0))


def test_ft_launcher_takes_torchruns_place_with_its_own_flags_before_the_script(tmp_path: Path) -> None:
    from chaos.runtime.launch import Rendezvous, workload_argv

    run = _run(tmp_path, "launcher: ft_launcher, launcher_args: {ft_rank_heartbeat_timeout: 5}, args: {steps: 3}")
    argv = workload_argv(run, Rendezvous(standalone=True), python="/venv/bin/python")
    assert argv[:3] == ["/venv/bin/python", "-m", "nvidia_resiliency_ext.fault_tolerance.launcher"]
    script = argv.index(str(tmp_path / "train.py"))
    assert argv[script - 2:script] == ["--ft-rank-heartbeat-timeout", "5"]
    assert "--standalone" in argv[:script] and argv[script + 1:] == ["--steps", "3"]
    default = workload_argv(_run(tmp_path, "args: {}"), Rendezvous(standalone=True), python="/venv/bin/python")
    assert default[2] == "chaos.runtime.torchrun"


def test_a_launcher_that_is_not_installed_is_refused_before_launch_naming_the_extra(tmp_path: Path, monkeypatch) -> None:
    import importlib.util

    import pytest

    from chaos.errors import CapabilityError
    from chaos.runtime import launch

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("nvidia_resiliency_ext") else real(name, *a))
    with pytest.raises(CapabilityError, match=r'ft_launcher.*pip install -e "\.\[nvrx\]"'):
        launch.check_launcher(_run(tmp_path, "launcher: ft_launcher"))
    launch.check_launcher(_run(tmp_path, "args: {}"))  # torchrun: nothing to install


def test_an_unknown_launcher_is_a_schema_error(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(Exception, match="launcher"):
        _run(tmp_path, "launcher: mpirun")
