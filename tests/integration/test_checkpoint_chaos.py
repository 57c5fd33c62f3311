"""Proof that checkpoint verdicts mean something: checkpoint managers with real-world bugs FAIL, each
with the right check and reason, under faults the reference workloads survive (experiments/).

That a kill on ``ckpt_begin`` really lands mid-write is the ``struck_mid_save`` check of
experiments/kill-during-save-fsdp.yaml (and of the HF Trainer ones), judged on every run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from chaos.spec.load import load_experiment
from chaos.evidence.outcome import RunReport
from chaos.run.runner import Runner

REPO = Path(__file__).resolve().parents[2]
MANAGERS = REPO / "tests" / "fixtures" / "ckpt_managers"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux"),
]

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to mount the size-limited checkpoint filesystem: run as root or in CI (.ci/run)")

KILL_RANK_0_DURING_SAVE_20 = """
  - kind: kill-rank
    rank: 0
    trigger: {on_event: {on_event: ckpt_begin, step: 20}, delay_s: 0.4}
"""


def run_manager(tmp_path: Path, name: str, faults: str, checks: list[str], *, max_restarts: int = 1,
                args: str = "{steps: 30, ckpt_every: 10, write_s: 1.5}") -> RunReport:
    script = MANAGERS / f"{name}.py"
    text = (f"name: {name.replace('_', '-')}\n"
            f"workload:\n  script: {script}\n  nproc_per_node: 2\n  max_restarts: {max_restarts}\n"
            f"  join_timeout_s: 45\n  args: {args}\n"
            f"target: local\nfaults:{faults}checks:\n" + "".join(f"  - {c}\n" for c in checks)
            + "timeout_s: 150\nseed: 0\n")
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    return Runner(load_experiment(path), runs_root=tmp_path / "runs").run()


def verdict(report: RunReport, kind: str):
    return next(r for r in report.checks if r.kind == kind)


def describe(report: RunReport) -> str:
    return "\n".join([f"run dir {report.run_dir}"] + [f"{r.kind}: {r.verdict} {r.reason}" for r in report.checks])


def test_select_by_presence_loads_a_corrupted_checkpoint(tmp_path: Path) -> None:
    faults = """
  - kind: corrupt-checkpoint
    mode: bitflip
    target: latest
    trigger: {on_event: {on_event: ckpt_commit, nth: 2}}
  - kind: kill-rank
    rank: 1
    trigger: {on_event: {on_event: ckpt_commit, nth: 2}, delay_s: 0.3}
"""
    report = run_manager(tmp_path, "select_by_presence", faults, ["checkpoint_integrity: {}"],
                         args="{steps: 30, ckpt_every: 10}")
    v = verdict(report, "checkpoint_integrity")
    assert v.verdict == "fail", describe(report)
    assert "deliberately corrupted checkpoint step_000020.pt" in v.reason, describe(report)
    assert "was loaded by attempt 0.1 without being rejected" in v.reason, describe(report)
    assert report.exit_code == 1


def test_latest_moved_before_the_data_is_durable(tmp_path: Path) -> None:
    report = run_manager(tmp_path, "latest_before_durable", KILL_RANK_0_DURING_SAVE_20,
                         ["checkpoint_integrity: {}"])
    v = verdict(report, "checkpoint_integrity")
    assert v.verdict == "fail", describe(report)
    assert v.reason.startswith("'latest' names step_000020.pt, which is invalid"), describe(report)
    assert report.exit_code == 1


def test_purge_before_commit_loses_the_committed_checkpoint(tmp_path: Path) -> None:
    report = run_manager(tmp_path, "purge_before_commit", KILL_RANK_0_DURING_SAVE_20,
                         ["completes: {}", "checkpoint_integrity: {}"])
    v = verdict(report, "checkpoint_integrity")
    assert v.verdict == "fail", describe(report)
    assert "resumed from a fresh start (step 0), but step 10 had been committed" in v.reason, describe(report)
    assert "it is gone from disk: a committed checkpoint was lost" in v.reason, describe(report)
    # The job itself "recovers": only the checkpoint verdict catches the lost progress.
    assert verdict(report, "completes").verdict == "pass", describe(report)


@needs_root
def test_crash_instead_of_retrying_on_enospc(tmp_path: Path) -> None:
    faults = """
  - kind: storage-full
    fs: tmpfs
    size_mb: 16
    trigger: {at_step: 15}
    duration_s: 3
"""
    report = run_manager(tmp_path, "crash_on_enospc", faults, ["completes: {max_restarts: 0}", "checkpoint_integrity: {}"],
                         max_restarts=2, args="{steps: 30, ckpt_every: 10, step_sleep: 0.1}")
    v = verdict(report, "completes")
    assert v.verdict == "fail", describe(report)
    assert "more than the allowed 0" in v.reason or "workload exited" in v.reason, describe(report)
    out = (report.run_dir / "output.log").read_text(errors="replace")
    assert "No space left on device" in out
    # The disk was full, not torn: what is on disk is still sound.
    assert verdict(report, "checkpoint_integrity").verdict == "pass", describe(report)
