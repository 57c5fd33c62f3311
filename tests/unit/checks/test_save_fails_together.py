"""save_fails_together: a true history (rank 1's write fails, the save is given up on every rank, training goes on)
passes; each lie, a mutation of it that breaks exactly the promise, does not."""

from __future__ import annotations

import copy
from typing import Any

from histsim import make_outcome

from chaos.checks.save_fails_together import SaveFailsTogether, SaveFailsTogetherConfig
from chaos.evidence.events import History
from chaos.evidence.outcome import FaultRecord

A = "0.0"


def rec(ev: str, t: float, rank: int | None = 0, **fields: Any) -> dict[str, Any]:
    out = {"ev": ev, "t": t, "attempt": A, "pid": 100 + (rank or 0), "host": "h", **fields}
    if rank is not None:
        out["rank"] = rank
    return out


def truth() -> list[dict[str, Any]]:
    """Steps 1-25 on two ranks; the step-20 save: rank 1's rng_rank1.pt fails (EIO) three times (retries), the save
    is abandoned (each rank's ckpt_error), both ranks train on; the fault is released at t=40 and step 30 commits."""
    out = [rec("start", 0.0, r, local_rank=r) for r in (0, 1)]
    for step in range(1, 31):
        for r in (0, 1):
            out.append(rec("step", float(step), r, step=step, epoch=0))
    out.append(rec("ckpt_begin", 20.1, 0, step=20, path="/c/step_000020"))
    for r in (0, 1):  # every rank gives the save up, as the agreement made it fail on all
        out.append(rec("ckpt_error", 21.0, r, step=20, path="/c/step_000020", error="rank 1: OSError: [Errno 5]"))
    out.append(rec("ckpt_begin", 30.1, 0, step=30, path="/c/step_000030"))
    out.append(rec("ckpt_commit", 30.5, 0, step=30, path="/c/step_000030", bytes=10, seconds=0.4))
    failures = [{"t": 20.2 + 0.3 * i, "op": "create", "path": f".tmp-step_000020-{i}/rng_rank1.pt", "errno": "EIO"}
                for i in range(3)]
    out.append({"ev": "slowfs", "t": 40.0, "source": "harness", "fault": "write-error#0", "index": 0,
                "failed_ops": 3, "failures": failures})
    # Steps are every second; move those after 20 a little past the failure so rank 1's next sign is step 21.
    return sorted(out, key=lambda r: r["t"])


def fault(t_release: float | None = 40.0) -> FaultRecord:
    return FaultRecord(index=0, kind="write-error", label="write-error#0", t_inject=15.0, t_revert=60.0,
                       t_release=t_release, details={"paths": ["*rng_rank1.pt"]})


def judge(records: list[dict[str, Any]], f: FaultRecord | None = None, **cfg: Any):
    check = SaveFailsTogether(SaveFailsTogetherConfig(**{"max_s": 5, **cfg}))
    return check.evaluate(make_outcome(History(copy.deepcopy(records)), faults=[f or fault()]))


def test_the_truth_passes_and_says_how_the_save_ended() -> None:
    r = judge(truth())
    assert r.verdict == "pass", r.reason
    assert "failed 3 write(s) in 1 save(s)" in r.reason and "given up by every rank (ckpt_error)" in r.reason


def test_a_rank_waiting_in_the_save_past_the_bound_fails() -> None:
    """Rank 0 waits for rank 1 in the save's collective: its next record is 12 s after the failure."""
    lie = [r for r in truth() if not (r.get("rank") == 0 and 20.2 < r["t"] < 32.0)]
    lie.append(rec("step", 32.5, 0, step=21, epoch=0))
    r = judge(lie)
    assert r.verdict == "fail" and "rank 0 did nothing for 12.3 s" in r.reason, r.reason


def test_a_rank_that_never_moves_again_fails() -> None:
    lie = [r for r in truth() if not (r.get("rank") == 1 and r["t"] > 20.2)]
    r = judge(lie)
    assert r.verdict == "fail" and "rank 1 never did anything after it" in r.reason, r.reason


def test_its_process_exiting_is_moving_on() -> None:
    """A job that gives up with the save (every rank exits at once) did not hang."""
    recs = [r for r in truth() if r["t"] <= 20.2 or r["ev"] == "slowfs"]
    recs += [{"ev": "worker_exit", "t": 21.0 + r, "source": "harness", "rank": r, "attempt": A} for r in (0, 1)]
    r = judge(recs)
    assert r.verdict == "pass" and "its process exited" in r.reason, r.reason


def test_a_writer_that_hangs_while_training_steps_on_fails() -> None:
    """An asynchronous save: both ranks keep stepping, but the step-20 save never ends."""
    lie = [r for r in truth() if not (r["ev"] == "ckpt_error") and not (r["ev"] == "ckpt_begin" and r["step"] == 30)
           and not (r["ev"] == "ckpt_commit")]
    r = judge(lie)
    assert r.verdict == "fail" and "reached no outcome" in r.reason, r.reason


def test_a_save_committed_while_the_writes_still_failed_fails() -> None:
    """Rank 0 commits step 20 without rank 1's file, the fault still acting."""
    lie = [r for r in truth() if r["ev"] != "ckpt_error"]
    lie.append(rec("ckpt_commit", 21.0, 0, step=20, path="/c/step_000020", bytes=10, seconds=0.9))
    r = judge(lie)
    assert r.verdict == "fail" and "still committed" in r.reason, r.reason
    # The same commit after the fault was released: a retry may have written everything, or rank 0 committed without
    # the part; with no sign of a retry it is not proven either way.
    assert judge(lie, fault(t_release=20.9)).verdict == "inconclusive"
    retried = lie + [rec("ckpt_begin", 20.95, 0, step=20, path="/c/step_000020")]
    assert judge(retried, fault(t_release=20.9)).verdict == "pass"


def test_nothing_to_judge_is_inconclusive() -> None:
    assert judge([]).verdict == "inconclusive"
    assert SaveFailsTogether(SaveFailsTogetherConfig()).evaluate(make_outcome(History(truth()))).verdict == "inconclusive"
    no_failures = [dict(r, failures=[], failed_ops=0) if r["ev"] == "slowfs" else r for r in truth()]
    assert "failed no write" in judge(no_failures).reason
    no_begin = [r for r in truth() if r["ev"] != "ckpt_begin"]
    assert judge(no_begin).verdict == "inconclusive"
    capped = [dict(r, failed_ops=80) if r["ev"] == "slowfs" else r for r in truth()]  # 80 failed, 3 listed
    assert "lists 3 of 80" in judge(capped).reason


def test_entering_the_failed_save_is_not_moving_on() -> None:
    """Rank 1 logs its own ckpt_begin of the save just after the failure, then hangs in it."""
    lie = [r for r in truth() if not (r.get("rank") == 1 and r["t"] > 20.2)]
    lie.append(rec("ckpt_begin", 20.25, 1, step=20, path="/c/step_000020"))
    r = judge(lie)
    assert r.verdict == "fail" and "rank 1 never did anything after it" in r.reason, r.reason


def test_a_rank_known_only_by_the_world_size_must_move_on_too() -> None:
    """Rank 1 never sent start (its records lost or relabelled); its peers' world_size says it was there."""
    lie = [dict(r, world_size=2) if r.get("rank") == 0 else r for r in truth()
           if not (r.get("rank") == 1)]
    r = judge(lie)
    assert r.verdict == "fail" and "rank 1 never did anything" in r.reason, r.reason


def test_a_run_stuck_after_everyone_moved_on_is_not_a_pass() -> None:
    stuck = truth() + [{"ev": "stuck", "t": 35.0, "source": "harness"}]
    assert judge(stuck).verdict == "inconclusive"


def test_a_workload_line_claiming_to_be_the_filesystem_is_not_evidence() -> None:
    """The failures come only from the harness's record: a rank's own 'slowfs' line is not read."""
    forged = [dict(r, source="rank") if r["ev"] == "slowfs" else r for r in truth()]
    assert judge(forged).verdict == "inconclusive"


def test_a_rank_that_trains_on_without_giving_the_save_up_is_not_proof_of_agreement() -> None:
    """Moving on is not agreeing: rank 1 stepping past the save with no ckpt_error of its own may have taken it for a
    good one (only rank 0 knew it failed). Nor does its ckpt_error of another save, or one from before the failure."""
    only_rank0 = [r for r in truth() if not (r["ev"] == "ckpt_error" and r["rank"] == 1)]
    r = judge(only_rank0)
    assert r.verdict == "inconclusive" and "only rank(s) 0 reported" in r.reason and "rank(s) 1 took it" in r.reason, \
        r.reason
    for wrong in ({"step": 10}, {"t": 20.0}):
        lie = [({**r, **wrong} if r["ev"] == "ckpt_error" and r["rank"] == 1 else r) for r in truth()]
        assert judge(sorted(lie, key=lambda r: r["t"])).verdict == "inconclusive", wrong
    # A rank whose process ended (the harness saw it exit) needs no word of its own.
    exited = only_rank0 + [{"ev": "worker_exit", "t": 22.0, "source": "harness", "attempt": A, "rank": 1,
                            "worker_pid": 101, "node": "local"}]
    assert judge(sorted(exited, key=lambda r: r["t"])).verdict == "pass"
