"""Reading the event protocol: malformed workload lines are named and left out, never read with defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.evidence.events import History, record_problem
from chaos.evidence.outcome import exit_code_for, judge_protocol

BASE = {"t": 1.0, "mono": 1.0, "pid": 1, "host": "h", "rank": 0, "world_size": 2, "attempt": "0.0"}


@pytest.mark.parametrize("record, problem", [
    ({"ev": "step", "step": "3", "epoch": 0}, "step event: 'step' must be int, got '3'"),
    ({"ev": "step", "epoch": 0}, "step event: 'step' must be int, missing"),
    ({"ev": "step", "step": True, "epoch": 0}, "'step' must be int"),
    ({"ev": "step", "step": 3, "epoch": 0, "samples": [1, "2"]}, "'samples' must be a list of dataset indices"),
    ({"ev": "ckpt_commit", "step": 10}, "ckpt_commit event: 'path' must be str, missing"),
    ({"ev": "final", "step": 5, "attempt": 0}, "final event: 'attempt' must be str, got 0"),
    ({"ev": "start", "rank": None}, "start event: 'rank' must be int, got None"),
    # A flag a check reads as "this step did not train its batch": a truthy stand-in is no answer.
    ({"ev": "step", "step": 3, "epoch": 0, "skipped": "true"}, "'skipped' must be true or false, got 'true'"),
    ({"ev": "step", "step": 3, "epoch": 0, "skipped": 1}, "'skipped' must be true or false, got 1"),
    ({"ev": "step", "step": 3, "epoch": 0, "participating": "no"}, "'participating' must be true or false"),
])
def test_protocol_breaks_are_named(record: dict, problem: str) -> None:
    assert problem in (record_problem({**BASE, **record}) or "")


@pytest.mark.parametrize("record", [
    {"ev": "step", "step": 3, "epoch": 0, "samples": [1, 2], "loss": 0.5},
    {"ev": "step", "step": 3, "epoch": 0},  # no samples: exactly_once says so itself
    {"ev": "step", "step": 3, "epoch": 0, "skipped": True, "participating": False},
    {"ev": "ckpt_load", "step": 0, "path": None},
    {"ev": "final", "step": 5, "digest": None},  # no digest: the golden checks say so themselves
    {"ev": "health", "code": 79},
])
def test_well_formed_records_pass(record: dict) -> None:
    assert record_problem({**BASE, **record}) is None


def test_a_run_with_malformed_lines_is_inconclusive(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    good = {**BASE, "ev": "step", "step": 1, "epoch": 0, "samples": [0, 1]}
    bad = {**BASE, "ev": "step", "step": "2", "epoch": 0}
    (events / "h-1.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n{not json\n")
    (tmp_path / "harness.jsonl").write_text(json.dumps({"ev": "launch", "t": 0.5, "source": "harness"}) + "\n")
    history = History.from_run_dir(tmp_path)
    assert [r["ev"] for r in history.records] == ["launch", "step"]
    assert len(history.malformed) == 2
    assert history.malformed[0].startswith("h-1.jsonl: step event: 'step' must be int, got '2'")
    assert history.malformed[1].startswith("h-1.jsonl: not JSON: {not json")
    result = judge_protocol(history.malformed)
    assert result.verdict == "inconclusive" and "2 event line(s) broke the protocol" in result.reason
    assert exit_code_for([result]) == 1


def _spawn(node: str, pid: int, attempt: str, generation: int, t: float) -> dict:
    return {"ev": "worker_spawn", "t": t, "source": "harness", "node": node, "worker_pid": pid,
            "attempt": attempt, "generation": generation}


def _ev(ev: str, host: str, pid: int, attempt: str, t: float, **kw) -> dict:
    return {"ev": ev, "t": t, "host": host, "pid": pid, "rank": 0, "attempt": attempt, **kw}


def test_align_attempts_gives_a_round_one_attempt() -> None:
    """A peer agent that only re-rendezvoused reports its old restart count: its new rank is relabelled."""
    from chaos.evidence.events import History

    h = History([
        _spawn("node0", 10, "0.0", 1, 1.0), _spawn("node1", 11, "0.0", 1, 1.0),
        _ev("start", "node0", 10, "0.0", 2.0), _ev("start", "node1", 11, "0.0", 2.0),
        _spawn("node1", 21, "0.1", 2, 5.0), _spawn("node0", 20, "0.0", 2, 5.1),
        _ev("start", "node0", 20, "0.0", 6.0), _ev("start", "node1", 21, "0.1", 6.0),
        {"ev": "worker_exit", "t": 9.0, "source": "harness", "node": "node0", "worker_pid": 20, "attempt": "0.0"},
    ])
    h.align_attempts()
    starts = {(r["host"], r["pid"]): r["attempt"] for r in h.of("start")}
    assert starts == {("node0", 10): "0.0", ("node1", 11): "0.0", ("node0", 20): "0.1", ("node1", 21): "0.1"}
    relabelled = next(r for r in h.of("start") if r["pid"] == 20)
    assert relabelled["attempt_reported"] == "0.0", "what the process said is kept next to the correction"
    assert h.of("worker_exit")[0]["attempt"] == "0.1"
    # A record the same process writes later is relabelled on the way in.
    h.add([_ev("step", "node0", 20, "0.0", 7.0, step=21, epoch=0, samples=[1])])
    assert h.of("step")[0]["attempt"] == "0.1"


def test_align_attempts_leaves_consistent_rounds_alone() -> None:
    from chaos.evidence.events import History

    h = History([_spawn("local", 10, "0.0", 1, 1.0), _spawn("local", 11, "0.0", 1, 1.0),
                 _ev("start", "local", 10, "0.0", 2.0), _spawn("local", 20, "0.1", 2, 5.0),
                 _ev("start", "local", 20, "0.1", 6.0)])
    h.align_attempts()
    assert [r["attempt"] for r in h.of("start")] == ["0.0", "0.1"]
    assert not any("attempt_reported" in r for r in h.records)


def test_a_script_that_keeps_its_label_across_a_requeue_gets_two_attempts() -> None:
    """Issue 32 item 19: a user's script writes attempt 0.0 in the job Slurm requeued too; the harness saw
    its processes in launch 1 (CHAOS_LAUNCH grew), so they are attempt 1.0 for every check and view."""
    from chaos.evidence.events import History
    from chaos.evidence.lineage import rebuild_lineage

    h = History([
        _spawn("n0", 10, "0.0", 0, 1.0), _ev("start", "n0", 10, "0.0", 2.0),
        _ev("step", "n0", 10, "0.0", 3.0, step=1, epoch=0, samples=[0]),
        _ev("ckpt_commit", "n0", 10, "0.0", 4.0, step=1, path="/c/1"),
        _spawn("n0", 20, "1.0", 1, 5.0), _ev("start", "n0", 20, "0.0", 6.0),
        _ev("ckpt_load", "n0", 20, "0.0", 6.5, step=1, path="/c/1"),
        _ev("step", "n0", 20, "0.0", 7.0, step=2, epoch=0, samples=[1]),
        _ev("final", "n0", 20, "0.0", 8.0, step=2),
    ])
    h.align_attempts()
    assert [(r["pid"], r["attempt"]) for r in h.of("start")] == [(10, "0.0"), (20, "1.0")]
    assert [r["attempt"] for r in h.of("final")] == ["1.0"] and h.final_attempt() == "1.0"
    assert not h.of("final", attempt="0.0")
    lineage = rebuild_lineage(h)
    assert [link.segment.name for link in lineage.links] == ["0.0", "1.0"], lineage.describe()
    # A process the harness never saw keeps the label it wrote.
    h.add([_ev("step", "n0", 99, "0.0", 9.0, step=3, epoch=0, samples=[2])])
    assert h.of("step")[-1]["attempt"] == "0.0"


def test_ranks_no_harness_saw_are_put_in_the_round_they_report() -> None:
    """A cluster of the user's: no worker_spawn, only the ranks' own start events with their round's store. A pod
    recreated after a delete writes 1.0, the surviving node's agent 0.1 for the same round: both become 1.0."""
    h = History([
        _ev("start", "node0", 10, "0.0", 1.0, rdzv_store="10.0.0.1:501"), _ev("start", "node1", 11, "0.0", 1.1, rdzv_store="10.0.0.1:501"),
        _ev("step", "node0", 10, "0.0", 2.0, step=1, epoch=0, samples=[0]),
        _ev("ckpt_commit", "node0", 10, "0.0", 3.0, step=1, path="/c/1"),
        _ev("start", "node1", 21, "1.0", 5.0, rdzv_store="10.0.0.1:733"), _ev("start", "node0", 20, "0.1", 5.2, rdzv_store="10.0.0.1:733"),
        _ev("ckpt_commit", "node0", 20, "0.1", 6.0, step=2, path="/c/2"),
        {"ev": "ckpt_verify", "t": 6.1, "source": "harness", "seen": "ckpt_commit", "t_event": 6.0, "path": "/c/2",
         "attempt": "0.1", "step": 2, "ok": True},
        {"ev": "ckpt_verify", "t": 3.1, "source": "harness", "seen": "ckpt_commit", "t_event": 3.0, "path": "/c/1",
         "attempt": "0.0", "step": 1, "ok": True},
    ])
    h.align_attempts()
    assert [(r["host"], r["attempt"]) for r in h.of("start")] == [
        ("node0", "0.0"), ("node1", "0.0"), ("node1", "1.0"), ("node0", "1.0")]
    assert [r["attempt"] for r in h.of("ckpt_commit")] == ["0.0", "1.0"]
    # The witness's look at the relabelled commit follows it (the check pairs them by attempt); the other is left.
    assert {r["t_event"]: r["attempt"] for r in h.of("ckpt_verify")} == {6.0: "1.0", 3.0: "0.0"}


@pytest.mark.parametrize("starts, expect", [
    # One store address for two rounds that follow each other: the rounds are told apart by what came between.
    ([("n0", 10, "0.0", 1.0, "a:1"), ("n0", 20, "0.1", 5.0, "a:2"), ("n0", 30, "0.2", 9.0, "a:1")],
     {10: "0.0", 20: "0.1", 30: "0.2"}),
    # ... or, back to back, by one local rank starting twice in it (one worker per local rank in a round).
    ([("n0", 10, "0.0", 1.0, "a:1"), ("n0", 20, "0.1", 5.0, "a:1")], {10: "0.0", 20: "0.1"}),
    # A pid a recreated pod numbers again, in two rounds: two processes, each in its own round by time.
    ([("n1", 9, "0.0", 1.0, "a:1"), ("n0", 8, "0.0", 1.1, "a:1"), ("n1", 9, "1.0", 5.0, "a:2"),
      ("n0", 8, "0.1", 5.1, "a:2")], {(9, 1.0): "0.0", (8, 1.1): "0.0", (9, 5.0): "1.0", (8, 5.1): "1.0"}),
    # Two rounds whose highest labels tie (a recreated pod writes 1.0 in both): one attempt they cannot be, so the
    # later is raised one restart past the earlier (three rendezvous, three attempts).
    ([("n0", 10, "0.0", 1.0, "a:1"), ("n1", 11, "0.0", 1.1, "a:1"), ("n0", 20, "0.1", 5.0, "a:2"),
      ("n1", 12, "1.0", 5.1, "a:2"), ("n0", 30, "0.2", 9.0, "a:3"), ("n1", 13, "1.0", 9.1, "a:3")],
     {10: "0.0", 11: "0.0", 20: "1.0", 12: "1.0", 30: "1.1", 13: "1.1"}),
    # Labels that are not launch.restart cannot be raised: left as written.
    ([("n0", 10, "x", 1.0, "a:1"), ("n0", 20, "x", 5.0, "a:2")], {10: "x", 20: "x"}),
    # No store written (the agent's shared store), or not an address: left as written.
    ([("n0", 10, "0.0", 1.0, None), ("n1", 11, "1.0", 1.1, None)], {10: "0.0", 11: "1.0"}),
    ([("n0", 10, "0.0", 1.0, 7), ("n1", 11, "1.0", 1.1, 7)], {10: "0.0", 11: "1.0"}),
    ([("n0", 10, "0.0", 1.0, "pretrain"), ("n1", 11, "1.0", 1.1, "pretrain")], {10: "0.0", 11: "1.0"}),
])
def test_reported_rounds_are_taken_only_where_they_are_unambiguous(starts, expect) -> None:
    h = History([_ev("start", host, pid, att, t, **({} if rnd is None else {"rdzv_store": rnd}))
                 for host, pid, att, t, rnd in starts])
    h.align_attempts()
    got = {r["pid"]: r["attempt"] for r in h.of("start")}
    got.update({(r["pid"], r["t"]): r["attempt"] for r in h.of("start")})
    assert {k: got[k] for k in expect} == expect


def test_a_round_the_harness_saw_is_not_relabelled_by_what_the_ranks_report() -> None:
    h = History([_spawn("n0", 10, "0.0", 1, 1.0), _spawn("n1", 11, "0.0", 1, 1.0),
                 _ev("start", "n0", 10, "0.0", 2.0, rdzv_store="a:1"),
                 _ev("start", "n1", 11, "7.7", 2.1, rdzv_store="a:1")])
    h.align_attempts()
    # The harness's own rounds decide (the highest label it read, 0.0): a rank's claim of 7.7 does not lift it.
    assert {r["pid"]: r["attempt"] for r in h.of("start")} == {10: "0.0", 11: "0.0"}
