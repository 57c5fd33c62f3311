"""The job as chaos assess was given it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.assess.job import Job
from chaos.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]


def test_a_script_with_its_arguments(tmp_path: Path) -> None:
    job = Job.of(["workloads/ddp.py"], args=["steps=60", "ckpt-every=10", "lr=0.5", "name=x", "flag=true"], cwd=ROOT)
    assert job.script == ROOT / "workloads" / "ddp.py" and job.name == "ddp"
    assert job.args == {"steps": 60, "ckpt_every": 10, "lr": 0.5, "name": "x", "flag": True}
    w = job.workload(experiments_dir=tmp_path)
    assert (tmp_path / w["script"]).resolve() == job.script and w["cwd"] == "{run_dir}/work"
    assert "DDP" in job.stack()  # from the modules beside the script it imports (trainkit)


def test_a_command_gets_the_paths_it_names_made_absolute(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import transformers\nfrom transformers import Trainer\n")
    (tmp_path / "conf").mkdir()
    job = Job.of(["torchrun", "--nproc-per-node", "2", "train.py", "--config", "./conf", "--steps", "5"], cwd=tmp_path)
    assert job.command == ("torchrun", "--nproc-per-node", "2", str(tmp_path / "train.py"), "--config",
                           str(tmp_path / "conf"), "--steps", "5")
    assert job.source == tmp_path / "train.py" and job.stack() == ["Hugging Face Transformers"]


@pytest.mark.parametrize("given,args,words", [
    ([], [], "a training script"),
    (["nothere.py"], [], "no such training script"),
    (["torchrun", "x"], ["steps=3"], "put the script's arguments in the command"),
    (["workloads/ddp.py"], ["steps"], "give KEY=VALUE"),
])
def test_bad_input_says_what_to_do(given: list[str], args: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        Job.of(given, args=args, cwd=ROOT)
