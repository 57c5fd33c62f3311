"""The goodput split over hand-made histories whose every second is known."""

from __future__ import annotations

import pytest

from chaos.evidence.events import History
from chaos.evidence.goodput import CAUSES, compute_goodput
from chaos.evidence.outcome import FaultRecord


def rec(ev: str, t: float, attempt: str | None = "0.0", rank: int = 0, **kw) -> dict:
    r = {"ev": ev, "t": t, "mono": t, "pid": 100 + rank, "host": "h", "rank": rank, **kw}
    if attempt is not None:
        r["attempt"] = attempt
    return r


def steps(attempt: str, first: int, last: int, t0: float, every: float = 1.0) -> list[dict]:
    out = []
    for i, step in enumerate(range(first, last + 1)):
        for rank in (0, 1):
            out.append(rec("step", t0 + i * every, attempt, rank, step=step, samples=[]))
    return out


def killed_run() -> tuple[History, FaultRecord]:
    """Launch 0; ranks up at 2; steps 1-10 at 3..12 with a 0.5 s save after step 5; rank 1 killed at 12.5;
    its peer exits at 14; the next attempt is up at 17, loads step 5 at 18, redoes 6-10 and trains 11-12; exit 26."""
    records = [
        {"ev": "launch", "t": 0.0, "source": "harness"},
        rec("start", 2.0, rank=0), rec("start", 2.0, rank=1),
        rec("ckpt_load", 2.5, step=0), *steps("0.0", 1, 10, 3.0),
        rec("ckpt_begin", 7.2, step=5, path="/c/5"), rec("ckpt_commit", 7.7, step=5, path="/c/5"),
        {"ev": "worker_exit", "t": 12.6, "worker_pid": 101, "attempt": "0.0", "source": "harness"},
        {"ev": "worker_exit", "t": 14.0, "worker_pid": 100, "attempt": "0.0", "source": "harness"},
        {"ev": "worker_spawn", "t": 15.0, "worker_pid": 200, "attempt": "0.1", "source": "harness"},
        rec("start", 17.0, "0.1", 0), rec("start", 17.0, "0.1", 1),
        rec("ckpt_load", 18.0, "0.1", step=5, path="/c/5"), *steps("0.1", 6, 12, 19.0),
        rec("final", 25.5, "0.1", step=12, digest="d"),
        {"ev": "exit", "t": 26.0, "code": 0, "source": "harness"},
    ]
    fault = FaultRecord(index=0, kind="kill-rank", label="software#1", t_inject=12.5, details={"pids": [101]})
    return History(records), fault


def test_every_second_of_a_killed_run_is_charged_to_its_cause() -> None:
    history, fault = killed_run()
    split = compute_goodput(history, [fault])
    assert not split.problems
    want = {"startup": 2.0, "productive": 11.5, "ckpt_save": 0.5, "detection": 2.0, "restart": 3.0,
            "ckpt_load": 1.0, "recompute": 5.0, "shutdown": 1.0}
    assert {k: round(v, 6) for k, v in split.seconds.items() if v} == want
    assert sum(split.seconds.values()) == pytest.approx(split.wall_s) == 26.0
    assert split.goodput == pytest.approx(11.5 / 26)
    # The victim's own exit at 12.6 is the fault, not the job noticing it: detection runs to the peer's at 14.
    assert split.by_fault == {"software#1": {"detection": 2.0, "restart": 3.0, "ckpt_load": 1.0, "recompute": 5.0}}


def test_a_restart_without_an_injected_fault_is_charged_to_no_fault() -> None:
    history, _ = killed_run()
    split = compute_goodput(history, [])
    assert split.seconds["detection"] == pytest.approx(0.6)  # to the first exit seen: nothing marks a victim
    assert split.by_fault == {}


def test_a_slow_step_pays_its_excess_over_the_median_as_slow() -> None:
    records = [{"ev": "launch", "t": 0.0}, rec("start", 1.0), *steps("0.0", 1, 6, 2.0),
               *steps("0.0", 7, 8, 11.0), rec("final", 12.5, step=8, digest="d"), {"ev": "exit", "t": 13.0, "code": 0}]
    split = compute_goodput(History(records))
    # Step 7 took 4 s against a 1 s median: 1.5 s of it is training, 2.5 s is slow.
    assert split.seconds["slow"] == pytest.approx(2.5)
    assert sum(split.seconds.values()) == pytest.approx(13.0)


def test_a_run_that_never_finished_ends_unrecovered_not_shut_down() -> None:
    records = [{"ev": "launch", "t": 0.0}, rec("start", 1.0), *steps("0.0", 1, 5, 2.0),
               {"ev": "exit", "t": 30.0, "code": None, "timed_out": True}]
    split = compute_goodput(History(records))
    assert split.seconds["unrecovered"] == pytest.approx(24.0)
    assert split.seconds["shutdown"] == 0.0


@pytest.mark.parametrize("records, missing", [
    ([], "no launch or no exit"),
    ([{"ev": "launch", "t": 0.0}, {"ev": "exit", "t": 9.0, "code": 0}], "no step events"),
])
def test_a_history_without_evidence_is_a_problem_not_a_split(records: list[dict], missing: str) -> None:
    split = compute_goodput(History(records))
    assert any(missing in p for p in split.problems)


def test_a_live_split_ends_now() -> None:
    records = [{"ev": "launch", "t": 0.0}, rec("start", 1.0), *steps("0.0", 1, 3, 2.0)]
    split = compute_goodput(History(records), now=10.0)
    assert split.wall_s == 10.0 and sum(split.seconds.values()) == pytest.approx(10.0)
    assert set(split.seconds) == set(CAUSES)


def test_an_in_process_rollback_bills_its_reload_where_it_happened() -> None:
    """Issue 32 (false FAIL): a NaN rollback reloaded step 4 at t 9.5; everything before the reload was billed
    as ckpt_load. Steps 1-6 at 3..8 (productive), the reload 8 -> 9.5 (ckpt_load), steps 5-6 again (recompute)
    at 10.5, 11.5, then 7-8 (productive) at 12.5, 13.5; exit 14."""
    records = [
        {"ev": "launch", "t": 0.0, "source": "harness"},
        rec("start", 2.0, rank=0), rec("start", 2.0, rank=1),
        rec("ckpt_load", 2.5, step=0), *steps("0.0", 1, 6, 3.0),
        rec("ckpt_load", 9.5, step=4, path="/c/4"), rec("ckpt_load", 9.5, rank=1, step=4, path="/c/4"),
        *steps("0.0", 5, 8, 10.5),
        rec("final", 13.8, step=8, digest="d"),
        {"ev": "exit", "t": 14.0, "code": 0, "source": "harness"},
    ]
    split = compute_goodput(History(records))
    assert not split.problems
    assert split.seconds["ckpt_load"] == pytest.approx(1.5)
    assert split.seconds["productive"] == pytest.approx(1.0 + 6.0 - 1.0 + 2.0)  # to step 1 at 3, 2..6, then 7, 8
    assert split.seconds["recompute"] == pytest.approx(2.0)


def test_an_asynchronous_save_bills_only_its_staging_and_its_write_overlaps_training() -> None:
    """Steps 1-10 at 3..12; step 5's save is staged in 0.2 s (ckpt_staged at 7.2 on both ranks) and written in the
    background from 7.2 to 9.9 while steps 6-7 train: 0.2 s of ckpt_save, not 2.7."""
    records = [
        {"ev": "launch", "t": 0.0, "source": "harness"},
        rec("start", 2.0, rank=0), rec("start", 2.0, rank=1), rec("ckpt_load", 2.5, step=0), *steps("0.0", 1, 10, 3.0),
        rec("ckpt_staged", 7.2, step=5, seconds=0.2), rec("ckpt_staged", 7.2, rank=1, step=5, seconds=0.15),
        rec("ckpt_begin", 7.2, step=5, path="/c/5"), rec("ckpt_commit", 9.9, step=5, path="/c/5"),
        rec("final", 12.5, step=10, digest="d"),
        {"ev": "exit", "t": 13.0, "code": 0, "source": "harness"},
    ]
    split = compute_goodput(History(records), [])
    assert split.seconds["ckpt_save"] == pytest.approx(0.2)
    # The same save written synchronously held training for all of its write: 2.5 s more badput, as much less
    # productive time, the rest alike.
    sync = compute_goodput(History([r for r in records if r["ev"] != "ckpt_staged"]), [])
    assert sync.seconds["ckpt_save"] == pytest.approx(2.7)
    assert split.seconds["productive"] == pytest.approx(sync.seconds["productive"] + 2.5)
    assert sum(split.seconds.values()) == pytest.approx(split.wall_s) == 13.0
    # A staging record whose length is no length (negative, NaN, text) proves no overlap: the whole write is billed.
    for bad in (-1.0, float("nan"), "0.2", True):
        lie = [dict(r, seconds=bad) if r["ev"] == "ckpt_staged" else r for r in records]
        assert compute_goodput(History(lie), []).seconds["ckpt_save"] == pytest.approx(2.7), bad


def synchronous_save() -> list[dict]:
    """Steps 1-5 at 3..7 on both ranks; a synchronous 3 s save of step 5 (7.05-10.05, no step on any rank during
    it); steps 6-10 at 10.5..14.5; exit 15.5. Truth: 3.0 s of ckpt_save."""
    return [{"ev": "launch", "t": 0.0, "source": "harness"},
            rec("start", 2.0, rank=0), rec("start", 2.0, rank=1), rec("ckpt_load", 2.5, step=0), *steps("0.0", 1, 5, 3.0),
            rec("ckpt_begin", 7.05, step=5, path="/c/5"), rec("ckpt_begin", 7.05, rank=1, step=5, path="/c/5"),
            rec("ckpt_commit", 10.05, step=5, path="/c/5"), rec("ckpt_commit", 10.05, rank=1, step=5, path="/c/5"),
            *steps("0.0", 6, 10, 10.5), rec("final", 15.0, step=10, digest="d"),
            {"ev": "exit", "t": 15.5, "code": 0, "source": "harness"}]


def staged(t: float, seconds: object, rank: int = 0) -> dict:
    return rec("ckpt_staged", t, rank=rank, step=5, seconds=seconds)


@pytest.mark.parametrize("lie", [
    [staged(7.05, 0.0), staged(7.05, 0.0, 1)],      # staging records for a save no step overlapped
    [staged(7.0, 0.2), staged(7.0, 0.2, 1)],
    [staged(1.0, 0.5), staged(1.0, 0.5, 1)],        # far from the begin it claims to precede
    [staged(-50.0, 0.5)],
    [staged(7.0, 0.2, 1)],                          # only one of the ranks that began the save
    [staged(10.05, 0.2), staged(10.05, 0.2, 1)],    # after the write began (staging comes first)
])
def test_staging_records_cannot_turn_a_synchronous_save_into_an_overlapped_one(lie: list[dict]) -> None:
    """An adversarial review's lies: each set of ckpt_staged records tried to bill a 3 s synchronous save as
    milliseconds of staging."""
    truth = compute_goodput(History(synchronous_save()), [])
    assert truth.seconds["ckpt_save"] == pytest.approx(3.0)
    lying = compute_goodput(History(sorted(synchronous_save() + lie, key=lambda r: r["t"])), [])
    assert lying.seconds["ckpt_save"] == pytest.approx(3.0) and lying.goodput == pytest.approx(truth.goodput)
