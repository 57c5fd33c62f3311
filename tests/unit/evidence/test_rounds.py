"""Each round of workers gets its own attempt: the labels of rounds the harness saw, live and after the run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chaos.checks.completes import Completes, CompletesConfig
from chaos.evidence.events import History
from chaos.evidence.rounds import round_labels
from chaos.runtime.processes import Worker


def test_a_kill_on_each_node_in_turn_is_two_restarts() -> None:
    """Only the agent whose worker failed counts a restart: kill on node1 (node1 counts 1, node0 stays 0), then on
    node0 (node0 counts 1, node1 still 1). The highest count repeats; the rounds are three all the same."""
    labels = round_labels([
        (1, [("node0", "0.0"), ("node1", "0.0")]),
        (2, [("node0", "0.0"), ("node1", "0.1")]),
        (3, [("node0", "0.1"), ("node1", "0.1")]),
        (4, [("node0", "0.1"), ("node1", "0.2")]),  # node1 again: counted, its 0.2 is not above round 3's label
    ])
    assert labels == {1: "0.0", 2: "0.1", 3: "0.2", 4: "0.3"}


@pytest.mark.parametrize("rounds, expected", [
    # A round whose node0 worker died before node1's was first seen is split in two: still one attempt.
    ([(1, [("node0", "0.0"), ("node1", "0.0")]), (2, [("node0", "0.1")]), (3, [("node1", "0.1")])],
     {1: "0.0", 2: "0.1", 3: "0.1"}),
    # One agent's workers seen in two pieces (its first died before its second appeared): nothing counted between.
    ([(1, [("h", "0.0"), ("h", "0.0")]), (2, [("h", "0.1")]), (3, [("h", "0.1")])], {1: "0.0", 2: "0.1", 3: "0.1"}),
    # Replica groups restart apart, numbered from one counter: each group's chain is its own.
    ([(1, [("rg0", "0.0")]), (2, [("rg1", "0.0")]), (3, [("rg1", "0.1")]), (4, [("rg0", "0.1")])],
     {1: "0.0", 2: "0.0", 3: "0.1", 4: "0.1"}),
    # A group the harness launched again starts its count afresh: nothing counted, nothing raised.
    ([(1, [("rg1", "0.1")]), (2, [("rg1", "0.0")])], {1: "0.1", 2: "0.0"}),
    # A requeue raises the launch: the label rises by itself.
    ([(1, [("n0", "0.1"), ("n1", "0.0")]), (2, [("n0", "1.0"), ("n1", "1.0")])], {1: "0.1", 2: "1.0"}),
])
def test_rounds_that_are_one_attempt_or_already_rise_are_left_alone(rounds, expected) -> None:
    groups = all(node.startswith("rg") for _, members in rounds for node, _ in members)  # a drop-replica job's
    assert round_labels(rounds, independent=groups) == expected


def _spawn(node: str, pid: int, attempt: str, generation: int, t: float) -> dict:
    return {"ev": "worker_spawn", "t": t, "source": "harness", "node": node, "worker_pid": pid,
            "attempt": attempt, "generation": generation}


def _ev(ev: str, host: str, pid: int, attempt: str, t: float, rank: int, **kw) -> dict:
    return {"ev": ev, "t": t, "host": host, "pid": pid, "rank": rank, "world_size": 2, "attempt": attempt, **kw}


def _two_kills() -> list[dict]:
    """A two-node job as it ran: rank 1 (node1) killed at step 3, rank 0 (node0) at step 5, done at step 8."""
    recs: list[dict] = []
    rounds = [(1, {"node0": "0.0", "node1": "0.0"}, 0, 3, 0.0), (2, {"node0": "0.0", "node1": "0.1"}, 2, 5, 10.0),
              (3, {"node0": "0.1", "node1": "0.1"}, 4, 8, 20.0)]
    for generation, reported, load, last, t in rounds:
        pids = {"node0": 100 * generation, "node1": 100 * generation + 1}
        for rank, node in enumerate(("node0", "node1")):
            recs.append(_spawn(node, pids[node], reported[node], generation, t))
            recs.append(_ev("start", node, pids[node], reported[node], t + 1, rank))
            recs.append(_ev("ckpt_load", node, pids[node], reported[node], t + 1.5, rank, step=load,
                            path=f"/c/{load}" if load else None))
            for step in range(load + 1, last + 1):
                recs.append(_ev("step", node, pids[node], reported[node], t + 2 + step * 0.1, rank, step=step,
                                epoch=0))
            recs.append({"ev": "worker_exit", "t": t + 9, "source": "harness", "node": node,
                         "worker_pid": pids[node], "attempt": reported[node]})
        if last == 8:
            recs.append(_ev("final", "node0", pids["node0"], reported["node0"], t + 8, 0, step=8))
    return recs


def test_two_restarts_count_as_two_and_a_bound_of_one_fails() -> None:
    h = History(_two_kills())
    h.align_attempts()
    assert h.attempts() == ["0.0", "0.1", "0.2"]
    assert {r["attempt"] for r in h.of("start") if r["pid"] in (300, 301)} == {"0.2"}
    assert h.final_attempt() == "0.2"
    outcome = SimpleNamespace(history=h, exit_code=0, timed_out=False, wall_s=30.0, output_tail="", diagnostics=[],
                              experiment=SimpleNamespace(workload=SimpleNamespace(args={"steps": 8}), timeout_s=60.0))
    assert Completes(CompletesConfig(max_restarts=2)).evaluate(outcome).verdict == "pass"
    result = Completes(CompletesConfig(max_restarts=1)).evaluate(outcome)
    assert result.verdict == "fail" and "needed 2 restarts" in result.reason, result.reason


def test_a_look_labelled_live_follows_its_event_into_its_round() -> None:
    """The witness looked at round 3's load while the runner still called the round 0.1 (node1's worker was seen
    first, its count not above round 2's); node0's worker raised it to 0.2 afterwards: the look goes with it."""
    recs = _two_kills()
    load = next(r for r in recs if r["ev"] == "ckpt_load" and r["pid"] == 301)
    recs.append({"ev": "ckpt_verify", "t": load["t"] + 0.01, "source": "harness", "seen": "ckpt_load",
                 "t_event": load["t"], "path": "/c/4", "attempt": "0.1", "step": 4, "ok": True})
    h = History(recs)
    h.align_attempts()
    [look] = h.of("ckpt_verify")
    assert look["attempt"] == "0.2"


class _Tree:
    def __init__(self) -> None:
        self.live: list[Worker] = []

    def workers(self) -> list[Worker]:
        return list(self.live)


def test_the_runners_live_labels_are_the_historys() -> None:
    """The runner labels rounds as their workers appear (the witness and the triggers read those labels); after the
    run the history labels them again from the spawns the runner logged. Both rules must give the same answer."""
    from chaos.run.runner import Runner

    logged: list[dict] = []
    history = History()
    run = SimpleNamespace(tree=_Tree(), launch_no=0, history=history,
                          log=lambda ev, **kw: logged.append({"ev": ev, "t": len(logged), "source": "harness", **kw}))
    runner = Runner.__new__(Runner)
    runner._round_members, runner._round_label, runner._t0 = {}, {}, 0.0
    runner.clock = SimpleNamespace(mono=lambda: 0.0)
    progress = SimpleNamespace(spawn=lambda *a: None)
    known: dict = {}

    def worker(pid: int, node: str, count: int, generation: int) -> Worker:
        return Worker(pid=pid, create_time=float(pid), rank=0 if node == "node0" else 1, local_rank=0,
                      restart_count=count, node=node, generation=generation)

    # Round 3's node1 worker is seen a poll before node0's, which raises the round.
    for live in ([worker(1, "node0", 0, 1), worker(2, "node1", 0, 1)],
                 [worker(3, "node1", 1, 2)], [worker(3, "node1", 1, 2), worker(4, "node0", 0, 2)],
                 [worker(5, "node1", 1, 3)], [worker(5, "node1", 1, 3), worker(6, "node0", 1, 3)]):
        run.tree.live = live
        runner._watch_workers(run, known, progress)  # type: ignore[arg-type]
    assert runner._round_label == {1: "0.0", 2: "0.1", 3: "0.2"}
    assert history.relabel[("node1", 5)] == "0.2", "the worker seen first is relabelled when its round is raised"
    after = History(logged)
    assert {g: label for g, label in ((s["generation"], lab) for s, lab in after.round_labels())} == \
        runner._round_label


def test_a_piece_of_a_round_seen_apart_takes_the_label_of_the_round_it_belongs_to() -> None:
    """node0 killed: its new workers (0.1) die before node1's new ones (still 0.0) are first seen, so the harness
    numbers node1's apart; they belong to attempt 0.1, not back in 0.0. The same after a raised label."""
    assert round_labels([(1, [("n0", "0.0"), ("n1", "0.0")]), (2, [("n0", "0.1")]), (3, [("n1", "0.0")]),
                         (4, [("n0", "0.2"), ("n1", "0.0")])]) == {1: "0.0", 2: "0.1", 3: "0.1", 4: "0.2"}
    assert round_labels([(1, [("n0", "0.0"), ("n1", "0.0")]), (2, [("n0", "0.0"), ("n1", "0.1")]),
                         (3, [("n0", "0.1"), ("n1", "0.1")]), (4, [("n1", "0.2")]), (5, [("n0", "0.1")])]) == \
        {1: "0.0", 2: "0.1", 3: "0.2", 4: "0.3", 5: "0.3"}
    # Replica groups restart apart: a group launched again counts from 0 and is no piece of another group's round.
    assert round_labels([(1, [("rg0", "0.1")]), (2, [("rg1", "0.0")])], independent=True) == {1: "0.1", 2: "0.0"}


def test_ranks_that_report_their_rounds_get_two_attempts_for_two_kills_on_different_nodes() -> None:
    """No process tree (the user's cluster): the rounds are the rendezvous stores the ranks report. Two kills on
    different nodes report 0.1 twice; the third rendezvous is a third attempt all the same."""
    recs = []
    for n, (store, reported) in enumerate([("10.0.0.1:500", ("0.0", "0.0")), ("10.0.0.1:600", ("0.0", "0.1")),
                                            ("10.0.0.1:700", ("0.1", "0.1"))]):
        for rank, node in enumerate(("node0", "node1")):
            recs.append(_ev("start", node, 10 * n + rank + 10, reported[rank], 10.0 * n + rank * 0.1, rank,
                            rdzv_store=store))
    h = History(recs)
    h.align_attempts()
    assert h.attempts() == ["0.0", "0.1", "0.2"]
