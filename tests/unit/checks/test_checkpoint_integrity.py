"""checkpoint_integrity over real files on disk and synthetic ckpt_* histories."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from histsim import Cursor, Sim, make_outcome

from chaos.checkpoint.manifest import build_manifest, write_manifest
from chaos.checks.base import FaultRecord, RunOutcome
from chaos.checks.checkpoint_integrity import CheckpointIntegrity, CheckpointIntegrityConfig
from chaos.evidence.events import History


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

    def save(self, step: int) -> None:
        """A sealed step directory on disk, as the workload's manager leaves it, with no event said about it."""
        d = self.root / f"step_{step:06d}"
        d.mkdir()
        torch.save({"w": torch.full((32, 32), float(step))}, d / "state.pt")
        write_manifest(d, build_manifest(d, step))

    def commit(self, step: int, attempt: str = "0.0", write: bool = True) -> None:
        if write:
            self.save(step)
            (self.root / "latest").write_text(f"step_{step:06d}")
        self.emit("ckpt_begin", attempt, step=step, path=self.path(step))
        self.emit("ckpt_commit", attempt, step=step, path=self.path(step), bytes=1, seconds=0.1)

    def witness(self, seen: str, step: int, ok: bool | None, problems: tuple[str, ...] = (),
                source: str = "harness") -> None:
        """The harness's ckpt_verify of the last ``seen`` event of step ``step`` (as chaos.evidence.witness writes it)."""
        event = [r for r in self.records if r["ev"] == seen and r.get("path") == self.path(step)][-1]
        self.emit("ckpt_verify", event["attempt"], source=source, path=self.path(step), step=step, seen=seen,
                  t_event=event["t"], ok=ok, gone=ok is None, format="manifest", problems=list(problems))

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


# ---- every load, and what it loaded ------------------------------------------------------------


def test_every_load_is_judged_each_once_however_many_ranks_report_it(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    r.emit("ckpt_reject", "0.1", path=r.path(20), reason="state.pt: checksum ...")
    r.load("0.1", 10)
    r.load("0.1", 20)  # an in-process reload that takes the corrupted checkpoint after all
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason.startswith("deliberately corrupted checkpoint step_000020 (corrupt-checkpoint#0: bitflip) "
                               "was loaded by attempt 0.1 (in-process reload 1) without being rejected")
    assert v.figures["loads"] == [("0.1", 10), ("0.1", 20)]


def test_a_loaded_path_no_commit_announced_fails(r: Run) -> None:
    r.commit(10)
    r.save(20)  # sealed on disk and valid, but nobody ever said it was committed
    r.load("0.1", 20)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == "attempt 0.1 loaded step_000020 (step 20), which no ckpt_commit announced before the load"


def test_a_save_made_durable_by_a_rank_killed_before_ckpt_commit_passes_once_the_harness_verified_the_load(
        r: Run) -> None:
    r.commit(10)
    r.save(20)
    r.emit("ckpt_begin", step=20, path=r.path(20))  # killed after the rename, before ckpt_commit
    r.load("0.1", 20)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == ("attempt 0.1 loaded step_000020 (step 20), whose save began but no ckpt_commit announced "
                        "before the load, and the harness has no look at it from when the load was seen")
    r.witness("ckpt_load", 20, ok=True, source="workload")  # a workload cannot vouch for itself
    assert r.judge().verdict == "fail"
    r.witness("ckpt_load", 20, ok=True)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert any("whose save began but never announced a commit; the harness verified it" in n
               for n in v.figures["notes"])


def test_a_load_the_harness_found_invalid_fails_though_the_workload_rejected_nothing(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.load("0.1", 20)
    r.witness("ckpt_load", 20, ok=False, problems=("state.pt: checksum 1f != manifest 2e",))
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == ("attempt 0.1 loaded step_000020, which the harness found invalid when the load was seen: "
                        "state.pt: checksum 1f != manifest 2e")


def test_a_corruption_after_which_no_load_was_reported_is_inconclusive(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    for step in (21, 22):  # a later attempt trains, but says nothing of what it loaded
        r.emit("step", "0.1", step=step)
    v = r.judge()
    assert v.verdict == "inconclusive"
    assert v.reason == ("the run never reported which checkpoint it loaded after corrupt-checkpoint#0 corrupted "
                        "step_000020; emit ckpt_load(step, path) on resume")


def test_a_corruption_no_resume_followed_is_inconclusive(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)
    r.emit("step", "0.0", step=21)
    v = r.judge()
    assert v.verdict == "inconclusive"
    assert v.reason.startswith("corrupt-checkpoint#0 corrupted step_000020, but no resume happened after the "
                               "corruption, so it was never put to the test; add a kill after it")


def test_a_corruption_that_failed_to_inject_is_not_judged_as_one(r: Run) -> None:
    r.commit(10)
    r.faults.append(FaultRecord(0, "corrupt-checkpoint", "corrupt-checkpoint#0", None, status="failed",
                                error="no committed checkpoint", details={"path": r.path(10)}))
    assert r.judge().verdict == "pass"


# ---- commits, as the harness saw them when they were announced ------------------------------------


def test_a_pruned_commit_is_judged_by_the_harness_look_at_its_commit(r: Run) -> None:
    import shutil

    for step in (10, 20, 30):
        r.commit(step)
    shutil.rmtree(r.root / "step_000010")  # retention
    v = r.judge()
    assert v.verdict == "inconclusive"
    assert v.reason.startswith("1 committed checkpoint(s) are gone from disk and were never verified by the "
                               "harness, so whether they were intact is unknown: step_000010 (step 10)")
    r.witness("ckpt_commit", 10, ok=True)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert v.reason == "2 checkpoint(s) on disk verify, 1 more verified by the harness when committed (gone since)"


def test_a_commit_torn_when_announced_fails_though_retention_deleted_it(r: Run) -> None:
    import shutil

    r.commit(10)
    r.witness("ckpt_commit", 10, ok=False, problems=("state.pt: size 100 != manifest 4811",))
    r.commit(20)
    shutil.rmtree(r.root / "step_000010")
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason == ("committed checkpoint step_000010 (ckpt_commit of step 10) was invalid when the harness "
                        "verified it at commit time (gone from disk since): state.pt: size 100 != manifest 4811")


def test_a_commit_look_overlapping_the_harness_corrupting_it_is_not_held_against_the_save(r: Run) -> None:
    r.commit(10)
    r.commit(20)
    r.corrupt(20)  # fired by the same ckpt_commit, before the witness got to it
    r.witness("ckpt_commit", 20, ok=False, problems=("state.pt: checksum 1f != manifest 2e",))
    r.emit("ckpt_reject", "0.1", path=r.path(20), reason="state.pt: checksum ...")
    r.load("0.1", 10)
    v = r.judge()
    assert v.verdict == "pass", v.reason
    assert any("overlapped corrupt-checkpoint#0 corrupting it" in n for n in v.figures["notes"])


def _commits_only(**witness: bool | None) -> Sim:
    sim = Sim()
    sim.start("0.0")
    sim.train("0.0", 1, 4, Cursor(16), ckpt_every=2)
    sim.final("0.0", 4)
    for path, ok in witness.items():
        sim.witness("ckpt_commit", "0.0", f"/ckpt/{path}", ok)
    return sim


def test_commits_nothing_could_verify_never_pass() -> None:
    check = CheckpointIntegrity(CheckpointIntegrityConfig())
    assert check.evaluate(make_outcome(History())).verdict == "fail"
    # Announced, gone, and never looked at: the harness cannot say they were ever intact.
    v = check.evaluate(make_outcome(_commits_only().history()))
    assert v.verdict == "inconclusive"
    assert v.reason.startswith("2 committed checkpoint(s) are gone from disk and were never verified")
    # Gone before the witness could look: still not a proof.
    v = check.evaluate(make_outcome(_commits_only(step_000002=None, step_000004=None).history()))
    assert v.verdict == "inconclusive"
    # A commit that names no path can be neither found on disk nor verified.
    sim = Sim()
    sim.start("0.0")
    sim.emit("ckpt_commit", "0.0", 0, step=2, path=None, bytes=10, seconds=0.1)
    v = check.evaluate(make_outcome(sim.history()))
    assert v.verdict == "inconclusive"
    assert v.reason.startswith("no checkpoint was verified intact: 1 commit(s) announced, none valid on disk")
    v = check.evaluate(make_outcome(_commits_only(step_000002=True, step_000004=True).history()))
    assert v.verdict == "pass", v.reason
    assert v.reason == "0 checkpoint(s) on disk verify, 2 more verified by the harness when committed (gone since)"


def test_an_unfinished_hf_save_the_stacks_resume_rule_picks_fails_though_nothing_claimed_it(r: Run) -> None:
    """The lying history: a commit of checkpoint-5, then a save of checkpoint-10 killed midway that no event
    calls committed. Judged only by what claims a commit, this PASSed; get_last_checkpoint picks checkpoint-10."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    for step, finished in ((5, True), (10, False)):
        d = r.root / f"checkpoint-{step}"
        d.mkdir()
        safetensors_torch.save_file({"w": torch.ones(4, 4)}, str(d / "model.safetensors"))
        if finished:
            torch.save({"state": {}}, d / "optimizer.pt")
            (d / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    r.emit("ckpt_begin", step=5, path=str(r.root / "checkpoint-5"))
    r.emit("ckpt_commit", step=5, path=str(r.root / "checkpoint-5"), bytes=1, seconds=0.1)
    r.emit("ckpt_begin", step=10, path=str(r.root / "checkpoint-10"))
    v = r.judge()
    assert v.verdict == "fail" and v.reason.startswith("checkpoint-10 is an unfinished save"), v.reason
    (r.root / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 10}')
    assert r.judge().verdict == "pass"


def test_saves_announced_below_the_checkpoint_directory_are_judged_where_they_are(r: Run) -> None:
    """Accelerate keeps project_dir/checkpoints/checkpoint_N: an unfinished newest save there (its registered
    object's file missing, which the finished one beside it has) PASSed when only the top directory was read."""
    below = r.root / "checkpoints"
    for number, finished in ((0, True), (1, False)):
        d = below / f"checkpoint_{number}"
        d.mkdir(parents=True)
        torch.save({"w": torch.ones(2)}, d / "model.bin")
        torch.save({"state": {}}, d / "optimizer.bin")
        torch.save({"seed": 0}, d / "random_states_0.pkl")
        if finished:
            torch.save({"step": 5}, d / "custom_checkpoint_0.pkl")
    r.emit("ckpt_begin", step=5, path=str(below / "checkpoint_0"))
    r.emit("ckpt_commit", step=5, path=str(below / "checkpoint_0"), bytes=1, seconds=0.1)
    r.emit("ckpt_begin", step=10, path=str(below / "checkpoint_1"))
    v = r.judge()
    assert v.verdict == "fail" and v.reason.startswith("checkpoint_1 is an unfinished save (it lacks "
                                                       "custom_checkpoint_0.pkl"), v.reason
    torch.save({"step": 10}, below / "checkpoint_1" / "custom_checkpoint_0.pkl")
    assert r.judge().verdict == "pass", r.judge().reason


def test_a_resume_that_passes_over_a_newer_checkpoint_still_on_disk_fails_and_says_so(r: Run) -> None:
    """Lightning's fit(ckpt_path="last") after a kill inside last.ckpt's write: the step's own file was
    committed first and is intact, the resume takes the older last.ckpt. Nothing was lost, but the resume
    went back further than the checkpoints allowed."""
    r.commit(5)
    r.commit(10)
    (r.root / "latest").write_text("step_000005")  # the pointer the resume follows was not moved on
    r.load("0.1", 5)
    v = r.judge()
    assert v.verdict == "fail"
    assert v.reason.startswith("attempt 0.1 resumed from step 5, but step 10 had been committed (step_000010) and "
                               "the harness did not corrupt it, and it is still on disk: the resume passed over it"), \
        v.reason
