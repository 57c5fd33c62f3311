"""``chaos assess`` on real jobs: the reference DDP workload, the HF Trainer workload, and a user's script that does not
speak the protocol. Each card's verdicts must agree with the shipped experiments for the same faults, and the
experiments it writes must be valid and give the same verdict when run again."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.run.session import run_experiment
from chaos.spec.load import load_experiment

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux")]


def assess(out: Path, *argv: str) -> tuple[int, dict]:
    code = main(["assess", "--out", str(out), *argv])  # before the job: after '--' all is the job's command
    card = json.loads((out / "card.json").read_text())
    return code, {r["probe"]: r for r in card["rows"]} | {"_card": card}


def test_the_reference_ddp_job_survives_a_kill_and_its_experiment_reproduces(tmp_path: Path) -> None:
    out = tmp_path / "card"
    code, rows = assess(out, str(ROOT / "workloads" / "ddp.py"), "--arg", "steps=60", "--arg", "ckpt_every=10",
                        "--arg", "seed=0", "--only", "rank-kill", "--project-gpus", "16384")
    kill = rows["rank-kill"]
    # As experiments/rank-kill-ddp.yaml: restarted once from the newest checkpoint, every sample once, bit-identical.
    assert code == 0 and kill["survived"] == "yes", kill
    assert kill["lost_steps"] == 5 and kill["exactly_once"] == "PASS" and kill["integrity"] == "PASS", kill
    assert {c["check"]: c["verdict"] for c in kill["checks"]} == {
        "completes": "pass", "recovery_time": "pass", "exactly_once": "pass", "checkpoint_integrity": "pass",
        "matches_golden": "pass"}
    card = rows["_card"]
    assert card["scale"]["gpus"] == 16384 and 0 < card["scale"]["goodput"] < 1
    assert rows["preempt"]["survived"] == "not run" and rows["hang"]["finding"] == "not asked for (--only)"
    html = (out / "report.html").read_text()
    assert "a rank dies between two saves" in html and "<script" not in html
    # The experiment it wrote is valid and gives the same verdict again.
    experiments = out / "experiments"
    assert main(["validate", str(experiments)]) == 0
    again = run_experiment(load_experiment(experiments / "ddp-rank-kill.yaml"), tmp_path / "again")
    assert again.exit_code == 0, [(c.kind, c.verdict, c.reason) for c in again.checks]


@pytest.mark.skipif(os.geteuid() != 0, reason="the kill inside a save slows the checkpoint disk (a FUSE mount): run as root")
def test_the_hf_trainer_torn_save_finding_agrees_with_its_shipped_experiment(tmp_path: Path) -> None:
    code, rows = assess(tmp_path / "card", str(ROOT / "workloads" / "hf_trainer.py"), "--arg", "steps=40",
                        "--arg", "ckpt_every=5", "--arg", "seed=0", "--arg", "num_workers=2",
                        "--only", "kill-during-save")
    row = rows["kill-during-save"]
    # As experiments/hf-trainer-kill-during-save.yaml (a known failure): the kill tore checkpoint-10, every restart
    # picks it and dies on its missing trainer_state.json.
    verdicts = {c["check"]: c["verdict"] for c in row["checks"]}
    assert code == 1 and row["survived"] == "no", row
    assert verdicts["struck_mid_save"] == "pass" and verdicts["completes"] == "fail", verdicts
    assert "trainer_state.json" in row["finding"] and "last_complete_checkpoint" in row["remedy"], row


def _epochs(run_dir: Path) -> list[str]:
    return [line for line in (run_dir / "output.log").read_text().splitlines()
            if "[rank0] Epoch" in line or "Resuming" in line]


def test_a_script_that_only_prints_gets_a_proposed_step_counter_and_an_honest_card(tmp_path: Path, monkeypatch) -> None:
    # A new user's torchrun tutorial script (tests/fixtures/workloads/tutorial_ddp.py), from a shell whose PATH lacks
    # the virtual environment: the harness finds torchrun next to its own interpreter.
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    assert shutil.which("torchrun") is None or Path(shutil.which("torchrun")).parent != Path(sys.executable).parent
    monkeypatch.chdir(ROOT)
    out = tmp_path / "card"
    script = "tests/fixtures/workloads/tutorial_ddp.py"
    code, rows = assess(out, "--only", "rank-kill", "--", "torchrun", "--standalone", "--nproc_per_node", "2",
                        "--max-restarts", "2", script, "30", "2", "--epoch_sleep", "0.15")
    seen = rows["_card"]["observation"]
    assert not seen["speaks_protocol"] and "Epoch" in seen["step_regex"] and seen["files"] == ["work/snapshot.pt"]
    assert seen["world_size"] == 2
    kill = rows["rank-kill"]
    # As tests/integration/test_user_script.py: the job resumes its own snapshot after the kill.
    assert code == 0 and kill["survived"] == "yes" and kill["integrity"] == "PASS", kill
    assert kill["exactly_once"].startswith("not traced") and "sdk.step(" in kill["exactly_once"]
    for name in ("kill-during-save", "storage-full", "corrupt-newest"):
        assert rows[name]["survived"] == "not run" and rows[name]["finding"].startswith("not run:"), rows[name]
    # Each run starts from epoch 0 in a directory of its own (the observation's snapshot is not the kill run's),
    # and the kill run resumes its own snapshot, which checkpoint_integrity judged in that directory.
    runs = [Path(seen["run_dir"]), Path(kill["run_dir"])]
    for run_dir in runs:
        lines = _epochs(run_dir)
        assert "Epoch 0 |" in lines[0] and not any("Resuming" in x for x in lines[:5]), lines[:5]
        assert (run_dir / "work" / "snapshot.pt").is_file()
    assert any("Resuming training from snapshot" in x for x in _epochs(runs[1]))
    assert "1 checkpoint(s) on disk verify" in next(c["reason"] for c in kill["checks"]
                                                    if c["check"] == "checkpoint_integrity")
    # The command's script is made absolute: the experiment runs from any folder.
    written = (out / "experiments" / "tutorial-ddp-rank-kill.yaml").read_text()
    assert str(ROOT / script) in written
