"""checkpoint_integrity over real files on disk and synthetic ckpt_* histories."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from chaos.checkpoint.manifest import build_manifest, write_manifest
from chaos.checks.base import FaultRecord, RunOutcome
from chaos.checks.checkpoint_integrity import CheckpointIntegrity, CheckpointIntegrityConfig
from chaos.events import History


class Run:
    """A checkpoint directory plus the events a workload would have written about it, 1 s apart."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.records: list[dict[str, Any]] = []
        self.faults: list[FaultRecord] = []
        self.t = 1000.0

    def emit(self, ev: str, attempt: str = "0.0", **fields: Any) -> float:
        self.t += 1
        self.records.append({"ev": ev, "t": self.t, "rank": 0, "attempt": attempt, **fields})
        return self.t

    def path(self, step: int) -> str:
        return str(self.root / f"step_{step:06d}")

    def commit(self, step: int, attempt: str = "0.0", write: bool = True) -> None:
        if write:
            d = self.root / f"step_{step:06d}"
            d.mkdir()
            torch.save({"w": torch.full((32, 32), float(step))}, d / "state.pt")
            write_manifest(d, build_manifest(d, step))
            (self.root / "latest").write_text(d.name)
        self.emit("ckpt_begin", attempt, step=step, path=self.path(step))
        self.emit("ckpt_commit", attempt, step=step, path=self.path(step), bytes=1, seconds=0.1)

    def load(self, attempt: str, step: int) -> None:
        for rank in (0, 1):
            self.t += 1
            self.records.append({"ev": "ckpt_load", "t": self.t, "rank": rank, "attempt": attempt,
                                 "step": step, "path": self.path(step) if step else None})

    def corrupt(self, step: int, mode: str = "bitflip") -> None:
        self.t += 1
        self.faults.append(FaultRecord(0, "corrupt-checkpoint", "corrupt-checkpoint#0", self.t,
                                       details={"mode": mode, "path": self.path(step), "step": step}))

    def judge(self, **config: Any) -> Any:
        exp = SimpleNamespace(workload=SimpleNamespace(args={}), timeout_s=60.0, name="t")
        outcome = RunOutcome(experiment=exp, run_dir=self.root.parent, ckpt_dir=self.root,  # type: ignore[arg-type]
                             history=History(list(self.records)), exit_code=0, timed_out=False, wall_s=1.0,
                             faults=self.faults)
        return CheckpointIntegrity(CheckpointIntegrityConfig(**config)).evaluate(outcome)


@pytest.fixture
def r(tmp_path: Path) -> Run:
    return Run(tmp_path / "ckpt")


def tear(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def test_clean_run_passes(r: Run) -> None:
    r.load("0.0", 0)
    r.commit(10)
    r.commit(20)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert v.reason.startswith("2 checkpoint(s) on disk verify")


def test_a_committed_checkpoint_torn_on_disk_fails(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    (r.root / "latest").write_text("step_000010")
    tear(r.root / "step_000020" / "state.pt")
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason.startswith("committed checkpoint step_000020 (ckpt_commit of step 20) is torn: state.pt: size")


def test_an_announced_single_file_written_in_place_and_torn_fails(r: Run) -> None:
    f = r.root / "checkpoint.pt"
    torch.save({"w": torch.ones(64, 64)}, f)
    r.emit("ckpt_commit", step=10, path=str(f), bytes=1, seconds=0.1)
    tear(f)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason.startswith("committed checkpoint checkpoint.pt (ckpt_commit of step 10) is torn: torn zip")


def test_latest_must_name_a_valid_checkpoint(r: Run) -> None:
    r.commit(10)
    (r.root / "step_000020").mkdir()  # a save that moved the pointer before writing anything
    (r.root / "latest").write_text("step_000020")
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == "'latest' names step_000020, which has no commit record (an unfinished save)"


def test_corrupted_checkpoint_loaded_fails(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    r.load("0.1", 20)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason.startswith("deliberately corrupted checkpoint step_000020 (corrupt-checkpoint#0: bitflip) "
                               "was loaded by attempt 0.1 without being rejected")


def test_corrupted_checkpoint_rejected_then_fallback_passes(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    r.emit("ckpt_reject", "0.1", path=r.path(20), reason="state.pt: checksum ...")
    r.load("0.1", 10)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert "1 put to the test by a resume" in v.reason


def test_corrupted_checkpoint_skipped_silently_fails(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    r.load("0.1", 10)
    v = r.judge()
    assert v.verdict == "fail"
    assert "was skipped without a ckpt_reject" in v.reason


def test_corrupted_then_recommitted_may_be_loaded(r: Run) -> None:
    r.commit(10)
    r.corrupt(10)
    r.emit("ckpt_reject", "0.1", path=r.path(10), reason="bad")
    r.load("0.1", 0)
    r.emit("ckpt_commit", "0.1", step=10, path=r.path(10), bytes=1, seconds=0.1)
    r.load("0.2", 10)
    assert r.judge().verdict == "pass"


def test_resuming_behind_the_newest_commit_fails(r: Run) -> None:
    r.commit(10)
    (r.root / "step_000010").rename(r.root / ".gone")  # purged by the next save before it committed
    (r.root / "latest").unlink()
    r.emit("ckpt_begin", step=20, path=r.path(20))
    r.load("0.1", 0)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == ("attempt 0.1 resumed from a fresh start (step 0), but step 10 had been committed "
                        "(step_000010) and the harness did not corrupt it, and it is gone from disk: "
                        "a committed checkpoint was lost")


def test_failed_save_that_destroyed_the_previous_checkpoint_fails(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    import shutil

    shutil.rmtree(r.root / "step_000020")
    (r.root / "latest").write_text("step_000010")
    r.emit("ckpt_error", step=30, path=r.path(30), error="OSError: [Errno 28] No space left on device")
    v = r.judge()
    assert v.verdict == "fail"
    assert "destroyed the previous good checkpoint step_000020" in v.reason


def test_failed_save_with_previous_intact_passes(r: Run) -> None:
    r.commit(10)
    r.emit("ckpt_error", step=20, path=r.path(20), error="ENOSPC")
    r.commit(30)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert "1 failed save(s) left the previous checkpoint intact" in v.reason


def test_no_checkpoint_at_all(r: Run) -> None:
    assert r.judge().verdict == "fail"
    assert r.judge(require_checkpoint=False).verdict == "inconclusive"
