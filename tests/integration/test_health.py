"""The xid experiments end to end on CPU: a real DDP job, a real monitor in each rank, the harness judging the action."""

from pathlib import Path

import pytest

from chaos.experiment import load_experiment
from chaos.runner import Runner

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _run(name: str, tmp_path: Path):
    report = Runner(load_experiment(EXPERIMENTS / f"{name}.yaml"), runs_root=tmp_path).run()
    verdicts = {r.kind: r for r in report.checks}
    assert report.passed, "; ".join(f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks)
    return report, verdicts


def test_xid_79_excludes_the_device_and_finishes_with_fewer_ranks(tmp_path: Path) -> None:
    report, verdicts = _run("xid-79-exclude", tmp_path)
    figs = verdicts["health_action"].figures["xid#0"]
    assert figs["actions"] == ["exclude"] and figs["rank"] == 1
    assert figs["world_size_after"] == [1] and 1 not in figs["visible_after"]
    finals = report.outcome.history.finals()
    assert finals and {f["world_size"] for f in finals} == {1}
    assert (report.run_dir / "excluded_devices.json").exists()


def test_xid_13_restarts_the_job_with_the_same_world(tmp_path: Path) -> None:
    report, verdicts = _run("xid-13-restart", tmp_path)
    figs = verdicts["health_action"].figures["xid#0"]
    assert figs["actions"] == ["restart"] and figs["restarted_as"] == "0.1"
    assert {f["world_size"] for f in report.outcome.history.finals()} == {2}
    assert not (report.run_dir / "excluded_devices.json").exists()


def test_xid_92_creep_checkpoints_once_degrading_without_a_restart(tmp_path: Path) -> None:
    report, verdicts = _run("xid-92-ecc-creep", tmp_path)
    figs = verdicts["health_action"].figures["xid#0"]
    assert figs["actions"][:3] == ["alert", "alert", "checkpoint"]
    assert figs["checkpoint_step"] % 40 != 0  # a save the schedule would not have made
    assert report.outcome.history.attempts() == ["0.0"]


@pytest.mark.parametrize("sink", ["kmsg"])
def test_the_real_kernel_log_is_refused_without_opt_in(tmp_path: Path, sink: str) -> None:
    text = (EXPERIMENTS / "xid-13-restart.yaml").read_text().replace("sink: file", f"sink: {sink}")
    exp = load_experiment(EXPERIMENTS / "xid-13-restart.yaml", text=text)
    from chaos.errors import CapabilityError

    with pytest.raises(CapabilityError, match="allow_kmsg"):
        Runner(exp, runs_root=tmp_path).run()
