"""The runs a coverage plan makes (each cell's experiment, their order, the calibration) and the plan's file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.errors import ExperimentError, UsageError
from chaos.evidence.events import History
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.outcome import RunOutcome, RunReport
from chaos.gate.coverage import run_coverage
from chaos.spec.load import load_experiment

PLAN = """
name: g
workload:
  command: [python, gate.py, --baseline, "{gate_dir}/b.json"]
  env: {WHERE: "{gate_dir}"}
target: local
gate:
  calibrate: [--record]
  healthy_runs: 2
  deadline_s: 30
  require_caught: [full]
faults:
  - {kind: storage-full, name: full}
  - {kind: kill-rank, rank: 1, trigger: {on_event: start}}
"""


def plan(tmp_path: Path, text: str = PLAN):
    (tmp_path / "gate.py").write_text("")
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return load_experiment(path)


class FakeRuns:
    """Stands in for the runner: records each experiment, answers with a run whose gate exits as told."""

    def __init__(self, codes: dict[str, int]) -> None:
        self.codes = codes
        self.seen = []

    def __call__(self, exp, folder: Path) -> RunReport:
        self.seen.append(exp)
        run_dir = folder / exp.name
        run_dir.mkdir()
        code = next((c for name, c in self.codes.items() if exp.name.endswith(name)), 0)
        records = [{"ev": "launch", "t": 10.0, "source": "harness"},
                   {"ev": "workload_exit", "t": 12.0, "code": code, "source": "harness"}]
        faults = [FaultRecord(index=s.index, kind=s.kind, label=s.config.name or f"{s.kind}#{s.index}", t_inject=9.0)
                  for s in exp.faults]
        out = RunOutcome(experiment=exp, run_dir=run_dir, ckpt_dir=run_dir, history=History(records),
                         exit_code=code, timed_out=False, wall_s=2.0, faults=faults)
        return RunReport(out, [], run_dir, 0)


def test_the_plan_loads_with_before_launch_as_the_default_trigger(tmp_path: Path):
    exp = plan(tmp_path)
    assert exp.gate is not None and exp.gate.healthy_runs == 2
    assert exp.faults[0].trigger.raw == {"before_launch": {"before_launch": True}}
    assert exp.faults[1].trigger.raw["on_event"]["on_event"] == "start"


def test_calibration_then_healthy_runs_then_one_run_per_fault(tmp_path: Path):
    exp = plan(tmp_path)
    runs = FakeRuns({"-full": 1, "kill-rank-1": 1})
    cov = run_coverage(exp, tmp_path / "runs", run=runs)
    names = [e.name for e in runs.seen]
    assert names == ["g-calibrate", "g-healthy-0", "g-healthy-1", "g-full", "g-kill-rank-1"]
    folder = Path(cov.folder)
    cal, healthy, full, kill = runs.seen[0], runs.seen[1], runs.seen[3], runs.seen[4]
    # The calibration's arguments go to it alone; {gate_dir} is the coverage run's folder everywhere.
    assert cal.workload.command == ["python", "gate.py", "--baseline", f"{folder.resolve()}/b.json", "--record"]
    assert healthy.workload.command[-1] == f"{folder.resolve()}/b.json"
    assert healthy.workload.env == {"WHERE": str(folder.resolve())}
    assert [e.faults for e in runs.seen[:3]] == [[], [], []]
    assert [s.config.name for s in full.faults] == ["full"] and [s.kind for s in kill.faults] == ["kill-rank"]
    # The gate answers for itself: the deadline is the run's limit, the runner's own patience is lifted.
    assert all(e.timeout_s == 30 and e.workload.stall_s is None and e.workload.join_timeout_s == 3600
               and e.checks == [] and e.gate is None for e in runs.seen)
    assert [c.verdict for c in cov.faults] == ["caught", "caught"]
    assert cov.problems() == (0, [])
    written = json.loads((folder / "coverage.json").read_text())
    assert written["exit_code"] == 0 and written["coverage"] == 1.0


def test_a_gate_that_fails_calibration_runs_nothing_else(tmp_path: Path):
    runs = FakeRuns({"-calibrate": 2})
    cov = run_coverage(plan(tmp_path), tmp_path / "runs", run=runs)
    assert [e.name for e in runs.seen] == ["g-calibrate"]
    code, why = cov.problems()
    assert code == 1 and why[0].startswith("calibration")


def test_a_missed_required_fault_fails_the_plan(tmp_path: Path):
    cov = run_coverage(plan(tmp_path), tmp_path / "runs", run=FakeRuns({"kill-rank-1": 1}))
    code, why = cov.problems()
    assert code == 1 and "full must be caught: MISSED" in why[0]


def test_an_experiment_is_not_a_coverage_plan(tmp_path: Path):
    exp = plan(tmp_path, PLAN.replace("gate:\n  calibrate: [--record]\n  healthy_runs: 2\n  deadline_s: 30\n"
                                      "  require_caught: [full]\n", "").replace("{kind: storage-full, name: full}",
                                                                                "{kind: storage-full, name: full, trigger: {at_step: 1}}"))
    with pytest.raises(UsageError, match="no gate section"):
        run_coverage(exp, tmp_path / "runs", run=FakeRuns({}))


@pytest.mark.parametrize("change, message", [
    (("require_caught: [full]", "require_caught: [fulll]"), "'fulll' names none of the faults"),
    (("faults:\n  - {kind: storage-full, name: full}\n  - {kind: kill-rank, rank: 1, trigger: {on_event: start}}\n",
      "faults: []\n"), "a coverage plan needs faults"),
    (("healthy_runs: 2", "healthy_runs: 0"), "greater than or equal to 1"),
    (("calibrate: [--record]", "calibrate: ['']"), "calibrate holds an empty argument"),
    (("{kind: kill-rank, rank: 1, trigger: {on_event: start}}", "{kind: kill-rank, name: full, rank: 1}"),
     "'full' is also the label of faults\\[0\\]"),
    (("{kind: storage-full, name: full}", "{kind: storage-full, name: full, duration_s: 2}"), "drop duration_s"),
])
def test_a_broken_plan_is_refused_with_where(tmp_path: Path, change, message):
    with pytest.raises(ExperimentError, match=message):
        plan(tmp_path, PLAN.replace(*change))


def test_chaos_run_refuses_a_coverage_plan(tmp_path: Path, capsys):
    from chaos.cli import main

    plan(tmp_path)
    assert main(["run", str(tmp_path / "plan.yaml"), "--runs-dir", str(tmp_path / "r")]) == 2
    assert "run it with 'chaos coverage" in capsys.readouterr().err


def test_chaos_coverage_refuses_an_experiment(tmp_path: Path, capsys):
    from chaos.cli import main

    (tmp_path / "x.yaml").write_text("name: x\nworkload: {command: [python, -c, pass]}\n")
    assert main(["coverage", str(tmp_path / "x.yaml"), "--runs-dir", str(tmp_path / "r")]) == 2
    assert "no 'gate:' section" in capsys.readouterr().err


def test_a_name_that_is_another_faults_default_label_is_refused(tmp_path: Path):
    text = PLAN.replace("{kind: storage-full, name: full}", "{kind: storage-full}").replace(
        "require_caught: [full]", "require_caught: [storage-full#0]").replace(
        "{kind: kill-rank, rank: 1, trigger: {on_event: start}}", "{kind: kill-rank, name: storage-full#0, rank: 1}")
    with pytest.raises(ExperimentError, match="needs its own name"):
        plan(tmp_path, text)


def test_an_unreachable_pushgateway_is_refused_before_any_run(tmp_path: Path, capsys):
    from chaos.cli import main

    plan(tmp_path)
    code = main(["coverage", str(tmp_path / "plan.yaml"), "--runs-dir", str(tmp_path / "r"),
                 "--metrics-pushgateway", "http://127.0.0.1:9"])
    assert code == 2 and "no Pushgateway answers there" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
