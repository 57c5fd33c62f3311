"""workload.python: the job's own interpreter, found without following the venv's symlink, checked before launch,
used for the launcher, a command's programs and torchft's lighthouse, and asked for the golden key's versions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.errors import CapabilityError, ExperimentError
from chaos.spec import interpreter
from chaos.spec.load import load_experiment


def _venv(path: Path) -> Path:
    """A real virtual environment with nothing installed (no pip, no torch)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def _exp(folder: Path, workload: str, target: str = "local"):
    (folder / "train.py").write_text("")
    return load_experiment(folder / "t.yaml", text=f"name: t\nworkload: {{script: train.py, {workload}}}\n"
                                                  f"target: {target}\n")


def test_a_relative_interpreter_is_found_above_the_experiment_file_and_keeps_the_venvs_link(tmp_path: Path) -> None:
    python = _venv(tmp_path / "envs" / "old")
    sub = tmp_path / "experiments"
    sub.mkdir()
    exp = _exp(sub, "python: envs/old/bin/python")
    found = interpreter.workload_python(exp)
    assert found == str(python)
    # The link's own path: resolved, it would be the base interpreter, without the environment's packages.
    assert Path(found).is_symlink() and Path(found).resolve() != Path(found)
    assert interpreter.workload_python(_exp(sub, "args: {}")) == sys.executable


def test_a_missing_interpreter_is_refused_before_launch_saying_how_to_make_it(tmp_path: Path) -> None:
    from chaos.runtime.launch import check_launcher

    exp = _exp(tmp_path, "python: .venvs/nowhere/bin/python")
    with pytest.raises(CapabilityError, match=r"workload.python \.venvs/nowhere/bin/python: no such interpreter "
                                              r"\(looked for relative to the experiment file's folder.*setup\.sh"):
        interpreter.check(exp)
    run = type("Run", (), {"experiment": exp})()
    with pytest.raises(CapabilityError, match="no such interpreter"):
        check_launcher(run)
    (tmp_path / "notexec").write_text("")
    with pytest.raises(CapabilityError, match="no such interpreter"):
        interpreter.check(_exp(tmp_path, f"python: {tmp_path / 'notexec'}"))


def test_an_interpreter_without_torch_is_refused_naming_what_to_install(tmp_path: Path) -> None:
    python = _venv(tmp_path / "bare")
    with pytest.raises(CapabilityError, match=rf"{python} cannot import torch; install it there"):
        interpreter.check(_exp(tmp_path, f"python: {python}"))


def test_a_launcher_missing_from_the_jobs_environment_is_refused(tmp_path: Path, monkeypatch) -> None:
    from chaos.runtime.launch import check_launcher

    python = _venv(tmp_path / "bare")
    monkeypatch.setattr(interpreter, "check", lambda exp: None)  # past the torch check: the launcher's own
    run = type("Run", (), {"experiment": _exp(tmp_path, f"python: {python}, launcher: ft_launcher")})()
    with pytest.raises(CapabilityError, match="ft_launcher needs NVIDIA Resiliency Extension"):
        check_launcher(run)


def test_the_launcher_and_a_commands_programs_come_from_the_jobs_environment(tmp_path: Path) -> None:
    import random

    from chaos.runtime.context import HarnessLog, RunContext
    from chaos.runtime.launch import Rendezvous, workload_argv
    from chaos.runtime.ledger import Ledger
    from chaos.runtime.shell import Shell

    python = _venv(tmp_path / "job")
    torchrun = python.parent / "torchrun"
    torchrun.write_text("#!/bin/sh\n")
    torchrun.chmod(0o755)

    def run_of(exp):
        log = HarnessLog(tmp_path / "harness.jsonl")
        return RunContext(experiment=exp, run_dir=tmp_path, ckpt_dir=tmp_path / "ckpt", ledger=Ledger(tmp_path),
                          shell=Shell(log), log=log, rng=random.Random(0))

    argv = workload_argv(run_of(_exp(tmp_path, f"python: {python}")), Rendezvous(standalone=True))
    assert argv[:3] == [str(python), "-m", "chaos.runtime.torchrun"]
    (tmp_path / "cmd.yaml").write_text(f"name: c\nworkload: {{command: [torchrun, train.py], python: {python}}}\n")
    argv = workload_argv(run_of(load_experiment(tmp_path / "cmd.yaml")), Rendezvous(standalone=True))
    assert argv[0] == str(torchrun)
    # A target's own interpreter (an image's) still wins where a target names one.
    argv = workload_argv(run_of(_exp(tmp_path, f"python: {python}")), Rendezvous(standalone=True), python="python3")
    assert argv[0] == "python3"


def test_targets_that_run_an_image_refuse_a_host_interpreter(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match=r"workload.python.*target docker runs the workload in an image"):
        _exp(tmp_path, "python: /usr/bin/python3", target="{kind: docker}")


def test_the_golden_key_holds_the_jobs_versions_not_the_harnesss(tmp_path: Path) -> None:
    python = _venv(tmp_path / "bare")
    assert not any(d.startswith("torch==") for d in interpreter.environment(str(python)))
    assert any(d.startswith("torch==2.") for d in interpreter.environment(sys.executable))
    own = _exp(tmp_path, "args: {}").workload_hash()
    bare = _exp(tmp_path, f"python: {python}")
    assert bare.workload_hash() != own
    # The same environment at another path is the same computation only if its versions are: the key has them.
    assert _exp(tmp_path, f"python: {sys.executable}").workload_hash() != own  # the field itself is in the key


def test_torchfts_lighthouse_is_the_jobs_own_or_none(tmp_path: Path, monkeypatch) -> None:
    from chaos.targets.torchft import LIGHTHOUSE, lighthouse_binary

    python = _venv(tmp_path / "old")
    monkeypatch.setenv("PATH", f"{tmp_path / 'elsewhere'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "elsewhere").mkdir()
    other = tmp_path / "elsewhere" / LIGHTHOUSE
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    # A lighthouse of another version than the replicas' is never taken for theirs.
    assert lighthouse_binary(str(python)) is None
    own = python.parent / LIGHTHOUSE
    own.write_text("#!/bin/sh\n")
    assert lighthouse_binary(str(python)) == str(own)


def test_the_jobs_environment_is_activated_and_only_the_chaos_package_added(tmp_path: Path, monkeypatch) -> None:
    """An installed harness's package folder is its whole site-packages: on the ranks' path it would shadow the
    environment's torch and stack. Only a folder holding chaos goes there; the environment's bin/ comes first."""
    python = _venv(tmp_path / "job")
    exp = _exp(tmp_path, f"python: {python}")
    env = interpreter.activation(exp, tmp_path / "run", "/users/own")
    assert env["PATH"].split(os.pathsep)[0] == str(python.parent)
    assert env["VIRTUAL_ENV"] == str(tmp_path / "job")
    only, users = env["PYTHONPATH"].split(os.pathsep)
    assert users == "/users/own" and os.listdir(only) == ["chaos"]
    assert (Path(only) / "chaos" / "sdk.py").is_file()
    assert interpreter.activation(_exp(tmp_path, "args: {}"), tmp_path / "run", None) == {}


def test_a_commands_program_from_another_environment_is_refused(tmp_path: Path, monkeypatch) -> None:
    """torchrun not in the job's environment but in the harness's, activated: the job would run with the harness's
    packages while the golden key and the findings name the job's."""
    python = _venv(tmp_path / "job")
    monkeypatch.setattr(interpreter, "_missing", lambda py, mods: [])  # past the torch check
    other = _venv(tmp_path / "harness")
    (other.parent / "torchrun").write_text("#!/bin/sh\n")
    (other.parent / "torchrun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "c.yaml").write_text(f"name: c\nworkload: {{command: [torchrun, train.py], python: {python}}}\n")
    with pytest.raises(CapabilityError, match=rf"runs torchrun, which {python.parent} does not have: it would be "
                                              rf"{other.parent / 'torchrun'}, of another virtual environment"):
        interpreter.check(load_experiment(tmp_path / "c.yaml"))
    (python.parent / "torchrun").write_text("#!/bin/sh\n")
    interpreter.check(load_experiment(tmp_path / "c.yaml"))  # the environment's own: fine
    (tmp_path / "s.yaml").write_text(f"name: s\nworkload: {{command: [sh, run.sh], python: {python}}}\n")
    interpreter.check(load_experiment(tmp_path / "s.yaml"))  # a system program: not another environment's


def test_two_environments_that_differ_in_one_package_never_share_a_golden(tmp_path: Path) -> None:
    """The lie: the same experiment file over an environment whose torchft was upgraded. A golden of the old one
    taken for the new would let matches_golden pass a computation it never saw."""
    python = _venv(tmp_path / "job")
    exp = _exp(tmp_path, f"python: {python}")
    before = exp.workload_hash()
    site = next((tmp_path / "job" / "lib").glob("python3*/site-packages"))
    info = site / "torchft-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchft\nVersion: 0.2.0\n")
    upgraded = exp.workload_hash()
    assert upgraded != before
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchft\nVersion: 0.3.0\n")
    assert exp.workload_hash() not in (before, upgraded)
