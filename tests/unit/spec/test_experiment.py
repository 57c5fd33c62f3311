"""The experiment loader: typed schema, and every problem reported with file, line, YAML path and fix."""

from __future__ import annotations

import os

import textwrap
from pathlib import Path

import pytest

from chaos.errors import ExperimentError
from chaos.spec.load import load_experiment
from chaos.spec.schema import json_schema

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
name: rank-kill
workload:
  script: workloads/ddp.py
  nproc_per_node: 2
  args: {steps: 60, ckpt_every: 10}
faults:
  - kind: kill-rank
    rank: 1
    trigger: {at_step: 25}
checks:
  - completes: {max_restarts: 1}
  - recovery_time: {metric: resume_s, max_s: 20}
"""


def write(tmp_path: Path, text: str) -> Path:
    exp_dir = tmp_path / "experiments"
    exp_dir.mkdir(exist_ok=True)
    (tmp_path / "workloads").mkdir(exist_ok=True)
    (tmp_path / "workloads" / "ddp.py").write_text("print('hi')\n")
    path = exp_dir / "x.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ExperimentError) as exc:
        load_experiment(write(tmp_path, text))
    return [str(p) for p in exc.value.problems]


def test_good_file_loads_typed(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, GOOD))
    assert exp.name == "rank-kill"
    assert exp.workload.nproc_per_node == 2
    assert exp.faults[0].kind == "kill-rank" and exp.faults[0].config.rank == 1
    assert exp.faults[0].trigger.raw == {"at_step": {"at_step": 25}}
    assert [c.kind for c in exp.checks] == ["completes", "recovery_time"]
    assert exp.resolve_script() == (tmp_path / "workloads" / "ddp.py").resolve()


def test_unknown_fault_kind_names_line_path_known_and_suggestion(tmp_path: Path) -> None:
    [msg] = problems(tmp_path, GOOD.replace("kind: kill-rank", "kind: kil-rank"))
    assert msg.startswith(f"{tmp_path}/experiments/x.yaml:7 faults[0].kind: unknown fault 'kil-rank'; known: ")
    assert "kill-rank" in msg and "Did you mean 'kill-rank'?" in msg


def test_every_problem_is_reported_not_just_the_first(tmp_path: Path) -> None:
    text = GOOD.replace("rank: 1", "rank: one").replace("max_s: 20", "max_s: -3").replace(
        "{at_step: 25}", "{at_stp: 25}")
    msgs = problems(tmp_path, text)
    assert any("faults[0].rank" in m and ":8 " in m for m in msgs), msgs
    assert any("faults[0].trigger.at_stp" in m and "Did you mean 'at_step'?" in m for m in msgs), msgs
    assert any("checks[1].recovery_time.max_s" in m and "greater than 0" in m for m in msgs), msgs


def test_unknown_field_suggests_the_right_one(tmp_path: Path) -> None:
    [msg] = problems(tmp_path, GOOD.replace("rank: 1", "rnak: 1"))
    assert "faults[0].rnak: unknown field for fault 'kill-rank'" in msg and "Did you mean 'rank'?" in msg


def test_unknown_check_and_bad_yaml(tmp_path: Path) -> None:
    [msg] = problems(tmp_path, GOOD.replace("completes:", "complete:"))
    assert "checks[0].complete: unknown check 'complete'" in msg and "Did you mean 'completes'?" in msg
    [msg] = problems(tmp_path, "name: x\nworkload: [unclosed\n")
    assert "x.yaml:3" in msg and "not valid YAML" in msg


def test_script_or_command_exactly_one(tmp_path: Path) -> None:
    [msg] = problems(tmp_path, "name: x\nworkload: {nproc_per_node: 2}\n")
    assert "workload" in msg and "exactly one of 'script'" in msg
    [msg] = problems(tmp_path, "name: x\nworkload: {script: nope.py}\n")
    assert "workload.script: script 'nope.py' not found" in msg


def test_trigger_forms(tmp_path: Path) -> None:
    text = GOOD.replace("{at_step: 25}", "{any: [{at_step: 25}, {after_s: 60}], delay_s: 1.5}")
    exp = load_experiment(write(tmp_path, text))
    assert exp.faults[0].trigger.delay_s == 1.5
    text = GOOD.replace("{at_step: 25}", "{at_step: 25, after_s: 3}")
    [msg] = problems(tmp_path, text)
    assert "one trigger kind per mapping" in msg and "any: [...]" in msg
    text = GOOD.replace("{at_step: 25}", "{on_event: {on_event: ckpt_commit, nth: 2}}")
    assert load_experiment(write(tmp_path, text)).faults[0].trigger.raw["on_event"]["nth"] == 2
    flat = load_experiment(write(tmp_path, GOOD.replace("{at_step: 25}", "{on_event: ckpt_commit, nth: 2, delay_s: 1}")))
    assert flat.faults[0].trigger.raw["on_event"]["nth"] == 2 and flat.faults[0].trigger.delay_s == 1
    [msg] = problems(tmp_path, GOOD.replace("{at_step: 25}", "{on_event: ckpt_commit, nht: 2}"))
    assert "trigger.nht: unknown field for trigger 'on_event'" in msg and "Did you mean 'nth'?" in msg


def test_command_workload_is_first_class(tmp_path: Path) -> None:
    text = "name: own\nworkload:\n  command: [torchrun, --standalone, train.py, --out, '{ckpt_dir}']\n"
    exp = load_experiment(write(tmp_path, text))
    assert exp.workload.command[-1] == "{ckpt_dir}" and exp.resolve_script() is None


def test_json_schema_is_generated_from_the_registered_configs() -> None:
    schema = json_schema()
    text = str(schema)
    assert "kill-rank" in text and "at_step" not in schema["properties"]
    assert schema["properties"]["faults"]["type"] == "array"
    assert "Global rank to kill" in text  # field docstrings become descriptions


def test_every_shipped_experiment_validates() -> None:
    files = sorted((ROOT / "experiments").glob("*.yaml"))
    assert files
    for path in files:
        load_experiment(path)


def test_every_registered_fault_and_check_has_an_example_experiment() -> None:
    from chaos.registry import CHECKS, FAULTS

    used_faults, used_checks = set(), set()
    for path in (ROOT / "experiments").glob("*.yaml"):
        exp = load_experiment(path)
        used_faults |= {f.kind for f in exp.faults}
        used_checks |= {c.kind for c in exp.checks}
    assert set(FAULTS.kinds()) <= used_faults, f"faults without an example: {set(FAULTS.kinds()) - used_faults}"
    assert set(CHECKS.kinds()) <= used_checks, f"checks without an example: {set(CHECKS.kinds()) - used_checks}"


def test_golden_omits_leave_the_golden_run_and_its_cache_key(tmp_path) -> None:
    base = "name: e\nworkload: {script: workloads/ddp.py, args: {steps: 4, fix: true}%s}\ntarget: local\nchecks: [{completes: {}}]\n"
    plain = load_experiment(tmp_path / "a.yaml", base.replace("fix: true", "") % "")
    shared = load_experiment(tmp_path / "b.yaml", base % ", golden_omits: [fix]")
    other = load_experiment(tmp_path / "c.yaml", base % "")
    assert shared.workload.golden_args() == {"steps": 4}
    assert shared.workload_hash() == plain.workload_hash() != other.workload_hash()
    # Its first name still reads, so experiment files written with it keep working.
    old_name = load_experiment(tmp_path / "e.yaml", base % ", resume_args: [fix]")
    assert old_name.workload.golden_args() == {"steps": 4} and old_name.workload_hash() == plain.workload_hash()
    with pytest.raises(Exception, match="golden_omits names nope, not in args"):
        load_experiment(tmp_path / "d.yaml", base % ", golden_omits: [nope]")
    # The harness's own limits on the run never change what it computes: one golden.
    limits = load_experiment(tmp_path / "f.yaml", base % ", golden_omits: [fix], stall_s: 90, join_timeout_s: 5")
    assert limits.workload.stall_s == 90 and limits.workload_hash() == plain.workload_hash()


def test_the_golden_key_knows_a_script_by_its_bytes_not_by_the_path_that_names_it(tmp_path) -> None:
    # chaos assess observes a job from one folder and writes its experiments in another: one golden run.
    text = "name: e\nworkload: {script: %s, args: {steps: 4}}\ntarget: local\nchecks: [{completes: {}}]\n"
    deeper = tmp_path / "a" / "b"
    deeper.mkdir(parents=True)
    script = ROOT / "workloads" / "ddp.py"
    here = load_experiment(tmp_path / "x.yaml", text % os.path.relpath(script, tmp_path))
    there = load_experiment(deeper / "x.yaml", text % os.path.relpath(script, deeper))
    assert here.workload.script != there.workload.script and here.workload_hash() == there.workload_hash()
    copy = tmp_path / "c" / "ddp.py"
    copy.parent.mkdir()
    copy.write_bytes(script.read_bytes() + b"\n# changed\n")
    assert load_experiment(tmp_path / "y.yaml", text % "c/ddp.py").workload_hash() != here.workload_hash()


def test_the_golden_key_follows_torchs_version_and_thread_count_without_importing_torch(tmp_path, monkeypatch) -> None:
    import subprocess
    import sys

    import chaos.spec.experiment

    text = "name: e\nworkload: {script: workloads/ddp.py, args: {steps: 4}}\ntarget: local\nchecks: [{completes: {}}]\n"
    exp = load_experiment(tmp_path / "a.yaml", text)
    monkeypatch.setattr(chaos.spec.experiment, "installed_version", lambda dist: "2.13.0+cpu")
    ours = exp.workload_hash()
    monkeypatch.setattr(chaos.spec.experiment, "installed_version", lambda dist: "2.14.0+cpu")
    assert exp.workload_hash() != ours, "a golden computed under another torch must not be reused"
    # Nor one computed with another intra-op thread count (the ranks inherit the harness's environment).
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    unset = exp.workload_hash()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = exp.workload_hash()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert len({unset, one, exp.workload_hash()}) == 3
    # The harness computes it beside the ranks it runs: importing torch there would cost ~1.2 CPU-s.
    probe = ("import sys; from chaos.spec.load import load_experiment; "
             f"load_experiment({str(ROOT / 'experiments' / 'rank-kill-ddp.yaml')!r}).workload_hash(); "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_the_golden_key_follows_a_commands_script_its_config_the_stack_and_the_device(tmp_path, monkeypatch) -> None:
    """Issue 32 (false FAIL): a stale golden was reused after a change the key left out."""
    import chaos.spec.experiment

    work = tmp_path / "job"
    work.mkdir()
    (work / "train.py").write_text("print('v1')\n")
    (work / "config.yaml").write_text("lr: 0.1\n")
    text = (f"name: e\nworkload: {{command: [python, train.py, --config=config.yaml], cwd: {work}}}\n"
            "target: local\nchecks: [{completes: {min_step: 1}}]\n")
    exp = load_experiment(tmp_path / "a.yaml", text)
    keys = [exp.workload_hash()]
    (work / "train.py").write_text("print('v2')\n")  # the script the command runs
    keys.append(exp.workload_hash())
    (work / "config.yaml").write_text("lr: 0.2\n")  # a config file it reads
    keys.append(exp.workload_hash())
    versions = {"transformers": "4.50.0"}
    monkeypatch.setattr(chaos.spec.experiment, "installed_version", lambda dist: versions.get(dist))
    keys.append(exp.workload_hash())
    versions["transformers"] = "4.51.0"  # the stack's own package
    keys.append(exp.workload_hash())
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # the device's numerics
    keys.append(exp.workload_hash())
    assert len(set(keys)) == len(keys), keys
    (work / "runs").mkdir()
    (work / "runs" / "journal.json").write_text("{}")  # what runs write below it is not config
    assert exp.workload_hash() == keys[-1]
