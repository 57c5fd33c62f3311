"""A user's own script, tried as a new user would: the torchrun tutorial's DDP script, which does not
speak the protocol and saves ``snapshot.pt`` where it runs (tests/fixtures/workloads/tutorial_ddp.py).

That each run gets a directory of its own and resumes its own snapshot is proven by ``chaos assess`` on the same
script (tests/integration/test_assess.py: its observation and its kill run are two runs of one command); here,
what checkpoint_integrity says when the snapshot is outside the directory it was pointed at.

It is started with ``torchrun`` in ``workload.command`` from a shell whose PATH lacks the virtual
environment (the harness finds torchrun next to its own interpreter), it gets a working directory
of each run's own (``workload.cwd``), so the second run does not resume the first one's snapshot,
and ``checkpoint_integrity`` judges ``snapshot.pt`` there through ``workload.ckpt_dir``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from chaos.spec.load import load_experiment
from chaos.run.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "workloads" / "tutorial_ddp.py"

pytestmark = pytest.mark.integration


def _experiment(tmp: Path, *, ckpt_dir: bool = True) -> Path:
    doc = {
        "name": "tutorial-ddp",
        "workload": {
            "command": ["torchrun", "--standalone", "--nproc_per_node", "2", "--max-restarts", "2", str(SCRIPT),
                        "30", "2", "--epoch_sleep", "0.15"],
            "cwd": "{run_dir}/work",
            "step_regex": r"\[rank0\] Epoch (?P<step>\d+) \|",
            **({"ckpt_dir": "{run_dir}/work"} if ckpt_dir else {}),
        },
        "faults": [{"kind": "kill-rank", "rank": 1, "trigger": {"at_step": 9}}],
        "checks": [{"completes": {"min_restarts": 1, "min_step": 29}}, {"checkpoint_integrity": {}}],
        "timeout_s": 180,
    }
    path = tmp / "tutorial.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_integrity_says_where_it_looked_and_where_the_snapshot_is(tmp_path: Path) -> None:
    report = Runner(load_experiment(_experiment(tmp_path, ckpt_dir=False)), runs_root=tmp_path / "runs",
                    golden=None).run()
    integrity = next(r for r in report.checks if r.kind == "checkpoint_integrity")
    # A fault ran, so a checkpoint is required: FAIL, naming where it looked and where the snapshot is.
    assert integrity.verdict == "fail", integrity.reason
    assert str(report.run_dir / "ckpt") in integrity.reason, integrity.reason
    assert str(report.run_dir.resolve() / "work" / "snapshot.pt") in integrity.reason, integrity.reason
    assert "workload.ckpt_dir" in integrity.reason, integrity.reason
    assert report.exit_code == 1
    journal = json.loads((report.run_dir / "journal.json").read_text())
    assert journal["exit_code"] == 1
