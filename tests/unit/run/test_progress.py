"""The run's progress folded from records alone: highest step, joins, stuck attempts; no processes."""

from __future__ import annotations

from chaos.run.progress import Progress


def ev(name: str, t: float, **fields) -> dict:
    return {"ev": name, "t": t, **fields}


def test_fold_keeps_one_history_and_the_facts_triggers_read() -> None:
    p = Progress()
    seen = ev("step", 3.0, step=9, source="output", attempt="0.0")  # logged by the harness as it saw it
    new = p.fold([ev("start", 1.0, attempt="0.0", rank=0), ev("step", 2.0, step=4, attempt="0.0", rank=0)],
                 [ev("worker_spawn", 0.5, source="harness"), seen], [seen])
    assert p.max_step == 9 and p.joined == {"0.0": {(None, 0)}}
    assert [r["ev"] for r in new] == ["start", "step", "step"]  # the triggers see the seen step too
    # The history holds each record once, in time order: the seen step came in through the log only.
    assert [(r["ev"], r["t"]) for r in p.history.records] == [
        ("worker_spawn", 0.5), ("start", 1.0), ("step", 2.0), ("step", 3.0)]


def test_a_late_record_is_put_in_its_place() -> None:
    p = Progress()
    p.fold([ev("step", 5.0, step=2, attempt="0.0", rank=0)], [], [])
    p.fold([ev("step", 4.0, step=1, attempt="0.0", rank=1)], [], [])
    assert [r["t"] for r in p.history.records] == [4.0, 5.0]


def test_an_attempt_is_named_stuck_once_after_the_join_timeout_and_only_while_ranks_are_missing() -> None:
    p = Progress()
    p.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    p.fold([ev("start", 1.0, attempt="0.0", rank=0)], [], [])
    assert p.newly_stuck(now_s=2.9, join_timeout_s=3) == [] and not p.still_stuck
    [stuck] = p.newly_stuck(now_s=3.1, join_timeout_s=3)
    assert stuck.message == "attempt 0.0 spawned, only 1 of 2 ranks joined the process group within 3 s"
    assert p.newly_stuck(now_s=9.0, join_timeout_s=3) == [] and p.still_stuck
    p.fold([ev("start", 9.5, attempt="0.0", rank=1)], [], [])
    assert not p.still_stuck


def test_replica_groups_whose_ranks_repeat_are_each_counted_as_joined() -> None:
    """torchft: two replica groups, each a world with its own rank 0, are one attempt's two members for the harness
    (nodes rg0 and rg1); both started, nothing is stuck however long the run goes on."""
    p = Progress()
    p.spawn("0.0", 0.0, {("rg0", 0), ("rg1", 0)})
    p.fold([ev("start", 1.0, attempt="0.0", rank=0, replica_group=0),
            ev("start", 1.1, attempt="0.0", rank=0, replica_group=1)], [], [])
    assert p.newly_stuck(now_s=100.0, join_timeout_s=3) == [] and not p.still_stuck
    q = Progress()  # only one group started: the other is missing
    q.spawn("0.0", 0.0, {("rg0", 0), ("rg1", 0)})
    q.fold([ev("start", 1.0, attempt="0.0", rank=0, replica_group=0)], [], [])
    [stuck] = q.newly_stuck(now_s=3.1, join_timeout_s=3)
    assert stuck.joined == 1 and stuck.world_size == 2


def test_a_script_that_never_speaks_the_protocol_is_never_called_stuck() -> None:
    # No attempt sent `start`: silence says nothing; such a run is bounded by timeout_s alone.
    p = Progress()
    p.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    assert p.newly_stuck(now_s=1000.0, join_timeout_s=3) == [] and p.newest_attempt == "0.0"
    p.spawn("0.10", 5.0, {("n", 0), ("n", 1)})
    p.spawn("0.9", 4.0, {("n", 0), ("n", 1)})
    assert p.newest_attempt == "0.10"


def test_a_first_attempt_that_said_hello_but_never_started_is_named_stuck() -> None:
    # The SDK says hello at import, before the process group: the first attempt's silence after
    # that is a hung init, named at the join timeout rather than at timeout_s.
    p = Progress()
    p.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    p.fold([ev("hello", 1.0, attempt="0.0", rank=0), ev("hello", 1.1, attempt="0.0", rank=1)], [], [])
    assert p.newly_stuck(now_s=2.9, join_timeout_s=3) == []
    [stuck] = p.newly_stuck(now_s=3.1, join_timeout_s=3)
    assert stuck.message.startswith("attempt 0.0 spawned, no rank joined the process group within 3 s (its ranks "
                                    "loaded chaos.sdk but none has sent start yet") and p.still_stuck
    assert "raise workload.join_timeout_s" in stuck.message


def test_steps_count_as_joined_and_steps_seen_in_the_output_do_not_speak() -> None:
    # A script that reports steps but never `start` has joined: it must not be named stuck.
    p = Progress()
    p.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    p.fold([ev("hello", 0.5, attempt="0.0", rank=0), ev("step", 1.0, step=1, attempt="0.0", rank=0),
            ev("step", 1.0, step=1, attempt="0.0", rank=1)], [], [])
    assert p.newly_stuck(now_s=100.0, join_timeout_s=3) == []
    # Steps read from a script's output by step_regex say nothing about the protocol.
    q = Progress()
    q.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    seen = ev("step", 1.0, step=1, source="output", attempt="0.0")
    q.fold([], [seen], [seen])
    assert q.max_step == 1 and not q.speaks and q.newly_stuck(now_s=100.0, join_timeout_s=3) == []


def test_a_job_silent_past_stall_s_is_named_stalled_from_its_last_record() -> None:
    p = Progress()
    assert p.stalled(now_s=500.0, stall_s=10) is None  # nothing heard yet: silence proves nothing
    p.spawn("0.0", 0.0, {("n", 0), ("n", 1)})
    p.fold([ev("start", 1.0, attempt="0.0", rank=0), ev("start", 1.0, attempt="0.0", rank=1)], [], [], now_s=2.0)
    p.fold([ev("step", 3.0, step=16, attempt="0.0", rank=0)], [], [], now_s=4.0)
    # The harness's own records are not the job speaking.
    p.fold([], [ev("fault_inject", 5.0, source="harness")], [], now_s=9.0)
    assert p.stalled(now_s=14.0, stall_s=10) is None
    assert p.stalled(now_s=14.5, stall_s=None) is None  # off unless asked for
    stall = p.stalled(now_s=14.5, stall_s=10)
    assert stall is not None and stall.idle_s == 10.5
    assert stall.message.startswith("no rank reported anything for 10 s (workload.stall_s 10); the last was step 16 "
                                    "of attempt 0.0")


def test_a_restart_and_a_step_read_from_the_output_are_signs_of_life() -> None:
    p = Progress()
    p.fold([ev("step", 1.0, step=1, attempt="0.0", rank=0)], [], [], now_s=1.0)
    p.spawn("0.1", 8.0, {("n", 0)})  # torchrun restarted the ranks: their start-up is not a stall
    assert p.stalled(now_s=15.0, stall_s=10) is None
    assert p.stalled(now_s=18.5, stall_s=10) is not None
    seen = ev("step", 18.0, step=2, source="output", attempt="0.1")
    p.fold([], [seen], [seen], now_s=19.0)
    assert p.stalled(now_s=28.0, stall_s=10) is None
