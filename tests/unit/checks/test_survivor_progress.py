"""survivor_progress on a three-group game day: a group still coming back from one fault when the next strikes.

The suite's loaded 2-core box took 15 s to bring a lost group back (2.4 s idle), longer than the game day's
faults were apart (gameday-torchft-ddp, runs/tests 20261207-225056 and -225220): the group relaunched after
the first fault, still importing torch when the second struck, was judged a survivor of the second from its
injection on, and its start-up read as a 9.08 s and an 8.77 s stall, while the groups that were training paused
2.07 s (the lighthouse's 2 s heartbeat timeout). The check measures a process still coming back from its
first committed step; the same history with a training survivor that really stops, or a returned process that
stops once it trains, still fails. ``game_day`` plays it on a box of any speed: every step time, start-up
and pause of the stack is scaled by ``slow``, the heartbeat timeout is not (a wait, not work)."""

from __future__ import annotations

from typing import Any

import pytest
from histsim import make_outcome

from chaos.checks.base import FaultRecord
from chaos.evidence.events import History
from chaos.registry import CHECKS

T = 1000.0
HEARTBEAT_S = 2.0


def game_day(*, slow: float = 1.0, up: float = 15.0, stop: tuple[int, float, float] | None = None,
             all_down: bool = False) -> tuple[list[dict[str, Any]], list[FaultRecord]]:
    """(records, faults): rg0, rg1, rg2 (pids 100, 101, 102) commit a step every ``0.07 * slow`` s from ``T``;
    fault A kills rg0 at T+10, fault B kills rg1 at T+19.5 (rg0's relaunch, pid 200, spawned 1.3 s after A, is
    still starting: its first step comes ``up`` s after A). Each training survivor pauses the heartbeat timeout
    plus ``0.1 * slow`` after each fault; rg1 comes back (pid 201) ``up`` s after B. ``stop``: (pid, at, for_s),
    that process commits nothing from T+``at`` for ``for_s`` s. ``all_down``: fault A takes rg0 and rg1 (one host,
    both relaunched) and fault B strikes rg2, the only group training then: the job's state has no survivor."""
    dt = 0.07 * slow
    recs: list[dict[str, Any]] = []
    a_t, b_t = T + 10.0, T + 19.5
    pause = HEARTBEAT_S + 0.1 * slow

    def harness(ev: str, t: float, pid: int, group: int) -> None:
        recs.append({"ev": ev, "t": t, "mono": t, "pid": 1, "host": "h", "source": "harness", "worker_pid": pid,
                     "rank": 0, "node": f"rg{group}", "attempt": "0.0" if pid < 200 else "0.1", "generation": 1})

    def rank(ev: str, t: float, pid: int, group: int, **fields: Any) -> None:
        recs.append({"ev": ev, "t": t, "mono": t, "pid": pid, "host": f"rg{group}", "rank": 0, "world_size": 1,
                     "attempt": "0.0" if pid < 200 else "0.1", "replica_group": group, **fields})

    # Who is up when: (pid, group, first step time, last alive time, spawned).
    if all_down:
        lives = [(100, 0, T, a_t, T - 5), (101, 1, T, a_t, T - 5), (102, 2, T, b_t, T - 5),
                 (200, 0, a_t + up, None, a_t + 1.3), (201, 1, a_t + up, None, a_t + 1.3),
                 (202, 2, b_t + up, None, b_t + 1.3)]
    else:
        lives = [(100, 0, T, a_t, T - 5), (101, 1, T, b_t, T - 5), (102, 2, T, None, T - 5),
                 (200, 0, a_t + up, None, a_t + 1.3), (201, 1, b_t + up, None, b_t + 1.3)]
    for pid, group, first, _, spawn in lives:
        harness("worker_spawn", spawn, pid, group)
        rank("start", first - 0.1 if pid >= 200 else T - 0.5, pid, group, local_rank=0, device="cpu",
             num_replica_groups=3)
        if pid >= 200:
            rank("heal", first - 0.05, pid, group, step=0, participants=2)
    # One clock of steps: a step is committed by every group training at its time, none during a quorum pause.
    t, step, last = T, 0, {}
    while step < 600:
        if any(f < t < f + pause for f in (a_t, b_t)):
            t = max(f + pause for f in (a_t, b_t) if f < t < f + pause)
            continue
        step += 1
        for pid, group, first, dead, _ in lives:
            if t >= first and (dead is None or t < dead):
                if stop is not None and pid == stop[0] and T + stop[1] <= t < T + stop[1] + stop[2]:
                    continue
                rank("step", t, pid, group, step=step, participants=2, digest=f"{step:016x}")
                last[pid] = step
        t += dt
    for pid, group, _, dead, _ in lives:
        if dead is None:
            rank("final", t, pid, group, step=step, digest="f" * 64)
            harness("worker_exit", t + 0.01, pid, group)
        else:
            harness("worker_exit", dead + 0.05, pid, group)
    recs.sort(key=lambda r: r["t"])
    faults = [FaultRecord(0, "kill-rank", "gpu#1", a_t, details={"pids": [100, 101] if all_down else [100],
                                                                 "ranks": [0]}, t_revert=a_t),
              FaultRecord(1, "kill-rank", "gpu#2", b_t, details={"pids": [102 if all_down else 101], "ranks": [0]},
                          t_revert=b_t)]
    return recs, faults


def verdict(records: list[dict[str, Any]], faults: list[FaultRecord], max_stall_s: float = 8) -> Any:
    check = CHECKS.get("survivor_progress")(CHECKS.get("survivor_progress").Config(max_stall_s=max_stall_s))
    return check.evaluate(make_outcome(History([dict(r) for r in records]), faults=faults))


@pytest.mark.parametrize("slow", [1.0, 3.0, 6.0])
def test_a_uniformly_slow_box_whose_survivors_keep_stepping_passes(slow: float) -> None:
    """The suite's case, at any speed: rg0's relaunch starts 15 s (x slow) after its fault, 5.5 s and more after
    the second fault struck rg1; rg2, training, pauses only the heartbeat timeout."""
    result = verdict(*game_day(slow=slow, up=15.0 * slow))
    assert result.verdict == "pass", result.reason
    figs = result.figures["gpu#2"]["survivors"]
    assert figs["rg0 (pid 200)"]["rejoining"] and figs["rg0 (pid 200)"]["first_step_s"] > 5.0, figs
    assert figs["rg2 (pid 102)"]["stall_s"] == pytest.approx(HEARTBEAT_S + 0.1 * slow, abs=0.07 * slow + 0.01), figs


def test_a_training_survivor_that_stops_for_many_step_times_fails() -> None:
    """rg2 commits nothing for 9 s (130 step times) from the second fault on, beside the relaunched rg0 that is
    excused its start-up: the excuse is rg0's, never the training survivor's."""
    result = verdict(*game_day(up=15.0, stop=(102, 19.4, 9.0)))
    assert result.verdict == "fail" and "rg2 (pid 102) went 9." in result.reason, result.reason


def test_a_returned_process_that_stops_once_it_trains_fails() -> None:
    """rg0's relaunch is judged from its first committed step: a 9 s stop after it (T+27 to T+36) is a stall."""
    result = verdict(*game_day(up=15.0, stop=(200, 27.0, 9.0)))
    assert result.verdict == "fail" and "rg0 (pid 200) went 9." in result.reason, result.reason


def test_a_returned_process_that_never_trains_fails() -> None:
    recs, faults = game_day(up=15.0)
    mute = [r for r in recs if not (r["pid"] == 200 and r["ev"] in ("step", "final"))]
    result = verdict(mute, faults)
    assert result.verdict == "fail" and "rg0 (pid 200)" in result.reason, result.reason


def test_a_process_of_the_first_launch_is_never_excused_its_wait() -> None:
    """rg2's steps before the second fault removed (a lie: it looks as if it had not trained yet): it was spawned
    at launch, before any fault struck its group, so it is still judged from the fault and its wait fails."""
    recs, faults = game_day(up=15.0, stop=(102, 0.0, 28.5))
    result = verdict(recs, faults)
    assert result.verdict == "fail" and "rg2 (pid 102)" in result.reason, result.reason


def test_a_fault_that_left_no_group_training_is_inconclusive() -> None:
    """The first fault took rg0 and rg1; the second strikes rg2, the only group training then, while both are
    still starting: no survivor held the job's state, and a pass would claim the job trained on."""
    result = verdict(*game_day(up=15.0, all_down=True))
    assert result.verdict == "inconclusive" and "still coming back" in result.reason, result.reason
