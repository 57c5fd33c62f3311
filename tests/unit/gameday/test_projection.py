"""The projection: Young's interval from the measured costs, the user's real costs in their place, and refusal without evidence."""

from __future__ import annotations

import math

import pytest

from chaos.evidence.events import History
from chaos.spec.mixes import LLAMA3_405B
from chaos.gameday.projection import goodput_at, project
from chaos.evidence.goodput import compute_goodput
from chaos.evidence.outcome import FaultRecord


def run_with_saves_and_a_kill() -> tuple[History, FaultRecord]:
    """Steps every 0.5 s, a 0.1 s save every 5 steps (2.5 s apart), one kill costing 2 s + 3 s + 1 s."""
    r: list[dict] = [{"ev": "launch", "t": 0.0}, {"ev": "start", "t": 1.0, "attempt": "0.0", "rank": 0}]
    for i in range(1, 21):
        r.append({"ev": "step", "t": 1.0 + i * 0.5, "attempt": "0.0", "rank": 0, "step": i, "epoch": 0})
        if i % 5 == 0:
            r += [{"ev": "ckpt_begin", "t": 1.05 + i * 0.5, "attempt": "0.0", "rank": 0, "step": i, "path": "p"},
                  {"ev": "ckpt_commit", "t": 1.15 + i * 0.5, "attempt": "0.0", "rank": 0, "step": i, "path": "p"}]
    r += [{"ev": "worker_exit", "t": 13.0, "worker_pid": 7, "attempt": "0.0"},
          {"ev": "start", "t": 16.0, "attempt": "0.1", "rank": 0},
          {"ev": "ckpt_load", "t": 17.0, "attempt": "0.1", "rank": 0, "step": 20}]
    r += [{"ev": "step", "t": 17.0 + i * 0.5, "attempt": "0.1", "rank": 0, "step": 20 + i, "epoch": 0}
          for i in range(1, 11)]
    r += [{"ev": "final", "t": 22.5, "attempt": "0.1", "rank": 0, "step": 30}, {"ev": "exit", "t": 23.0, "code": 0}]
    return History(r), FaultRecord(index=0, kind="kill-rank", label="gpu#1", t_inject=11.2, details={"pids": [8]})


def test_young_interval_and_goodput_from_the_measured_costs() -> None:
    history, fault = run_with_saves_and_a_kill()
    split = compute_goodput(history, [fault])
    p = project(split, history, {"gpu#1": "gpu"}, LLAMA3_405B, [16384])
    assert p is not None
    assert p.restart_s == pytest.approx(2.0 + 3.0 + 1.0)  # detection 11..13, restart 13..16, load 16..17
    assert p.save_s == pytest.approx(0.1) and p.interval_s == pytest.approx(2.5)
    [row] = p.rows
    mtbf_s = 54 * 24 * 3600 / 419
    assert row.mtbf_h == pytest.approx(mtbf_s / 3600)
    assert row.tau_young_s == pytest.approx(math.sqrt(2 * 0.1 * mtbf_s))
    assert row.goodput_used == pytest.approx(goodput_at(2.5, 0.1, 6.0, mtbf_s))
    assert row.goodput_young > row.goodput_used  # a longer interval pays off at this failure rate


def test_the_users_real_costs_replace_the_measured_ones_but_not_in_the_check_on_the_run() -> None:
    history, fault = run_with_saves_and_a_kill()
    split = compute_goodput(history, [fault])
    measured = project(split, history, {"gpu#1": "gpu"}, LLAMA3_405B, [16384])
    real = project(split, history, {"gpu#1": "gpu"}, LLAMA3_405B, [16384], save_s=120.0, restart_s=900.0)
    assert real is not None and measured is not None
    assert real.save_s == 120.0 and real.restart_s == 900.0 and "given in the plan" in real.measured_by["save_s"]
    assert real.rows[0].tau_young_s == pytest.approx(math.sqrt(2 * 120.0 * 54 * 24 * 3600 / 419))
    assert real.played == measured.played


def test_no_interruption_or_no_save_projects_nothing() -> None:
    history, fault = run_with_saves_and_a_kill()
    split = compute_goodput(history, [])
    assert project(split, history, {}, LLAMA3_405B, [1024]) is None
