"""ci/stacks_table.py: a run's stack version is the one its interpreter imported (workload.python), not the
harness's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "ci"))

import stacks_table  # noqa: E402


def _env_with_torchft(root: Path, version: str) -> Path:
    """A virtual environment whose site-packages hold a distribution ``torchft`` of ``version`` (metadata only)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "torchft").mkdir()
    (site / "torchft" / "__init__.py").write_text("")
    info = site / f"torchft-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchft\nVersion: {version}\n")
    (info / "top_level.txt").write_text("torchft\n")
    return root / "bin" / "python"


def test_a_frameworks_row_reports_the_version_the_jobs_environment_ran(tmp_path: Path) -> None:
    _env_with_torchft(tmp_path / "envs" / "old", "0.2.0")
    exp = tmp_path / "old.yaml"
    exp.write_text("name: old\nworkload: {script: workloads/torchft_ddp.py, python: envs/old/bin/python}\n"
                   "target: {kind: torchft}\n")
    run = tmp_path / "runs" / "old-1"
    run.mkdir(parents=True)
    (run / "journal.json").write_text(json.dumps({
        "experiment": "old", "source": str(exp), "faults": [{"label": "kill-rank#1", "recovery": {"detect_s": 0.5}}],
        "checks": [{"kind": "survivor_progress", "verdict": "fail"}]}))
    (row,) = stacks_table.rows(tmp_path / "runs", frameworks=True)
    assert row[:4] == ["torchft, drop-replica (replica groups under a lighthouse)", "0.2.0", "`old.yaml`",
                       "kill-rank#1"]
    assert row[4 + stacks_table.FRAMEWORK_CHECKS.index("survivor_progress")] == "FAIL"
    # Without workload.python the harness's own environment ran it.
    exp.write_text("name: old\nworkload: {script: workloads/torchft_ddp.py}\ntarget: {kind: torchft}\n")
    (row,) = stacks_table.rows(tmp_path / "runs", frameworks=True)
    assert row[1] == stacks_table.version("torchft-nightly")


def test_an_environment_that_is_not_here_any_more_is_reported_unknown_not_as_the_harnesss(tmp_path: Path) -> None:
    assert stacks_table.version("torchft-nightly", str(tmp_path / "gone" / "bin" / "python")).startswith("unknown (")
