"""What chaos assess reads from a fault-free run: the step counter a job that only prints shows, and a history."""

from __future__ import annotations

import re
from pathlib import Path

from chaos.assess.job import Job
from chaos.assess.observe import derive, propose_step_regex
from chaos.evidence.events import History


def _tutorial(epochs: int = 6) -> list[str]:
    lines = ["W1207 torch.distributed.run: Setting OMP_NUM_THREADS environment variable for each process"]
    for e in range(epochs):
        for rank in (1, 0):  # ranks print in any order; each its own counter
            lines.append(f"[rank{rank}] Epoch {e} | Batchsize: 32 | Steps: 8")
        if e % 2 == 1:
            lines.append(f"Epoch {e} | Training snapshot saved at snapshot.pt")
    return lines


def test_a_printed_counter_is_proposed_on_the_lowest_ranks_lines() -> None:
    regex, values, note = propose_step_regex(_tutorial())
    assert regex is not None, note
    assert values == [0, 1, 2, 3, 4, 5], values  # rank 1's lines and the save lines are not counted again
    assert re.search(regex, "[rank0] Epoch 12 | Batchsize: 32").group("step") == "12"
    assert re.search(regex, "[rank1] Epoch 12 | Batchsize: 32") is None
    assert "proposed" in note and "Epoch" in note


def test_a_step_counter_wins_over_an_epoch_counter_that_rises_less_often() -> None:
    lines = []
    for step in range(1, 13):
        lines.append(f"step {step} loss 0.{step}")
        if step % 4 == 0:
            lines.append(f"epoch {step // 4} done")
    regex, values, _ = propose_step_regex(lines)
    assert values == list(range(1, 13)) and "step" in regex


def test_no_counter_is_said_never_guessed() -> None:
    for lines in ([], ["loading", "loss 0.3", "loss 0.2"], ["step 5", "step 3", "step 4"], ["iter 7"] * 5):
        regex, values, note = propose_step_regex(lines)
        assert regex is None and values == [] and "--step-regex" in note, (lines, regex)


def _history(steps: int, save_every: int, samples: bool = True) -> History:
    recs = [{"ev": "launch", "t": 100.0, "source": "harness"}]
    t = 110.0
    for rank in (0, 1):
        recs.append({"ev": "start", "t": t, "rank": rank, "world_size": 2, "attempt": "0.0", "pid": 10 + rank,
                     "host": "local", "dataset_size": 64})
    for s in range(1, steps + 1):
        t += 0.5
        for rank in (0, 1):
            rec = {"ev": "step", "t": t, "step": s, "epoch": 0, "rank": rank, "world_size": 2, "attempt": "0.0",
                   "pid": 10 + rank, "host": "local", "loss": 0.1}
            if samples:
                rec["samples"] = [s * 2 + rank]
            recs.append(rec)
        if s % save_every == 0:
            for rank in (0, 1):
                base = {"step": s, "rank": rank, "attempt": "0.0", "pid": 10 + rank, "host": "local",
                        "path": f"/runs/x/ckpt/step-{s}"}
                recs.append({"ev": "ckpt_begin", "t": t + 0.01, **base})
                recs.append({"ev": "ckpt_commit", "t": t + 0.21, "bytes": 10, "seconds": 0.2, **base})
    for rank in (0, 1):
        recs.append({"ev": "final", "t": t + 1, "step": steps, "digest": "d", "rank": rank, "attempt": "0.0",
                     "pid": 10 + rank, "host": "local", "world_size": 2})
    return History(recs)


def test_a_protocol_run_gives_its_saves_step_time_and_startup(tmp_path: Path) -> None:
    seen = derive(_history(20, 5), tmp_path, Job(script=Path(__file__)), exit_code=0, timed_out=False, wall_s=25.0)
    assert seen.speaks_protocol and seen.world_size == 2 and seen.final_step == 20
    assert seen.saves == [5, 10, 15, 20] and seen.save_every == 5 and seen.save_s == 0.2
    assert seen.step_s == 0.5 and seen.startup_s == 10.5
    assert seen.samples_traced and seen.digests and seen.problem is None and seen.step_regex is None


def test_a_run_that_failed_or_restarted_without_faults_is_no_reference(tmp_path: Path) -> None:
    job = Job(script=Path(__file__))
    failed = derive(_history(20, 5), tmp_path, job, exit_code=1, timed_out=False, wall_s=25.0)
    assert failed.problem and "exited 1" in failed.problem
    late = derive(_history(20, 5), tmp_path, job, exit_code=None, timed_out=True, wall_s=25.0)
    assert late.problem and "--timeout-s" in late.problem
    untraced = derive(_history(20, 5, samples=False), tmp_path, job, exit_code=0, timed_out=False, wall_s=25.0)
    assert not untraced.samples_traced


def test_a_job_that_only_prints_gets_a_proposed_regex_and_its_files_seen(tmp_path: Path) -> None:
    (tmp_path / "output.log").write_text("\n".join(_tutorial(6)) + "\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "snapshot.pt").write_bytes(b"x")
    (tmp_path / "work" / "notes.txt").write_text("not a checkpoint")
    seen = derive(History([{"ev": "launch", "t": 1.0, "source": "harness"}]), tmp_path, Job(script=Path(__file__)),
                  exit_code=0, timed_out=False, wall_s=12.0)
    assert not seen.speaks_protocol and seen.step_regex and seen.final_step == 5
    assert seen.files == ["work/snapshot.pt"] and seen.ckpt_dir == "{run_dir}/work"
    assert seen.step_s == 2.0 and seen.step_s_how.startswith("estimated")


def test_a_step_logged_every_n_steps_is_still_the_step_counter() -> None:
    lines = []
    for step in range(50, 501, 50):
        lines.append(f"step {step} loss 0.3")
        lines += [f"eval batch {b}" for b in range(1, 4)] if step % 250 == 0 else []
    regex, values, note = propose_step_regex(lines)
    assert "step" in regex and values == list(range(50, 501, 50)) and "every 50" in note, note


def test_an_epoch_counter_is_said_to_count_epochs() -> None:
    lines = [f"epoch {e} step {s} loss 0.5" for e in range(1, 5) for s in range(10, 110, 10)]
    regex, values, note = propose_step_regex(lines)  # the step counter restarts each epoch: it falls
    assert "epoch" in regex and "counts epochs, not optimizer steps" in note, note
