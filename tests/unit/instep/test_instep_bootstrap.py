"""The in-step bootstrap: on the ranks' path only when a run arms an in-step fault, and then it installs itself
as soon as torch's optimizers are imported, without hiding another sitecustomize."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chaos.faults.nan import Nan, NanConfig
from chaos.instep.command import DIR_ENV, read_all
from chaos.runtime.context import RunContext
from chaos.runtime.launch import INSTEP_BOOTSTRAP, PACKAGE_ROOT, workload_env
from instep_runs import run_with

PROBE = ("import sys, torch.optim; from chaos.instep import rank; r = rank._runtime; "
         "print(r is not None and r.rank, 'chaos.instep.rank' in sys.modules)")


def _python(env: dict[str, str], code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_bootstrap_installs_on_torch_optim_and_runs_the_sitecustomize_it_hides(tmp_path: Path) -> None:
    hidden = tmp_path / "site"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(INSTEP_BOOTSTRAP), str(hidden), str(PACKAGE_ROOT)]),
           DIR_ENV: str(tmp_path / "instep"), "RANK": "3"}
    assert _python(env, PROBE) == "3 True"
    assert (tmp_path / "ran").exists(), "the sitecustomize the bootstrap hides was not run"


def test_without_an_armed_run_nothing_is_installed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != DIR_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(INSTEP_BOOTSTRAP), str(PACKAGE_ROOT)])
    assert _python(env, "import sys, torch.optim; print('chaos.instep.rank' in sys.modules)") == "False"


def _run(tmp_path: Path) -> RunContext:
    return run_with(tmp_path, "{kind: nan, rank: 1, trigger: {at_step: 5}}")


def test_only_a_run_that_arms_an_in_step_fault_puts_the_bootstrap_on_the_ranks_path(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert str(INSTEP_BOOTSTRAP) not in workload_env(run, "local")["PYTHONPATH"]
    fault = Nan(NanConfig(rank=1), 0)
    fault.check(run)
    fault.prepare(run)
    env = workload_env(run, "local")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(INSTEP_BOOTSTRAP)
    assert env[DIR_ENV] == str((tmp_path / "run" / "instep").resolve())


def test_inject_writes_the_command_and_the_revert_removes_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path)
    run.run_dir = Path("run")  # relative, as the pytest plugin's runs directory is: the undo still reverts
    fault = Nan(NanConfig(rank=1, where="param", element=3), 0)
    fault.prepare(run)
    details = fault.inject(run)
    [cmd] = read_all(str(run.instep_dir))
    assert cmd.ranks == [1] and cmd.where == "param" and cmd.params["element"] == 3 and details["steps"] == 1
    assert fault.revert(run) == []
    assert read_all(str(run.instep_dir)) == []


def test_a_rank_outside_the_world_is_refused_before_launch(tmp_path: Path) -> None:
    import pytest

    from chaos.errors import CapabilityError

    with pytest.raises(CapabilityError, match="rank 2 does not exist in a world of 2 ranks"):
        Nan(NanConfig(rank=2), 0).check(_run(tmp_path))
